//! Waiting for a file descriptor (a completion channel, the RDMA CM event channel) to become
//! readable, with a timeout: the one `ppoll(2)` call the target's threads sleep in (nix's safe
//! wrapper: the descriptors are borrowed for the call, `AsFd`).
//!
//! The timeout has nanosecond resolution (`ppoll` takes a `timespec`; `poll(2)` counts whole
//! milliseconds, so a paced transfer due in 300 us would have been a 0 ms wait, a busy spin).
//! The kernel rounds it up to its timer slack (50 us for a normal thread), never down.

use std::os::fd::AsFd;
use std::time::Duration;

use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use smallvec::SmallVec;

/// Waits until `fd` is readable or `timeout` passes. `Ok(true)`: readable (or hung up, which a
/// read then reports); `Ok(false)`: timed out or interrupted by a signal.
/// `fd` is anything that owns a descriptor (a CQ, the CM, a socket), borrowed for the call.
pub fn wait_readable(fd: &impl AsFd, timeout: Duration) -> std::io::Result<bool> {
    wait_any(&[fd as &dyn AsFd], timeout)
}

/// Waits until any of `fds` is readable or `timeout` passes; `Ok(true)` when one is.
pub fn wait_any(fds: &[&dyn AsFd], timeout: Duration) -> std::io::Result<bool> {
    Ok(wait_ready(fds, timeout)? != 0)
}

/// Most descriptors [`wait_ready`] takes (one bit each in its answer).
pub const MAX_WAIT_FDS: usize = 8;

/// Longest single wait; a longer timeout is cut to it (the caller looks again and waits more).
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

/// Waits until any of `fds` is readable (or reports an error or hang-up) or `timeout` passes,
/// and says which: bit `i` of the answer is set when `fds[i]` is; 0 after a timeout or a
/// signal. Callers skip the read that would only answer `EAGAIN` on the others (a syscall
/// each, expensive where every system call is emulated). At most [`MAX_WAIT_FDS`] descriptors;
/// no heap allocation (a poller calls this every time it goes to sleep). The wait is at least
/// `timeout` unless a descriptor becomes ready (at most [`MAX_WAIT`]).
pub fn wait_ready(fds: &[&dyn AsFd], timeout: Duration) -> std::io::Result<u32> {
    if fds.len() > MAX_WAIT_FDS {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("wait_ready takes at most {MAX_WAIT_FDS} descriptors"),
        ));
    }
    let mut pfds: SmallVec<[PollFd<'_>; MAX_WAIT_FDS]> = fds
        .iter()
        .map(|f| PollFd::new(f.as_fd(), PollFlags::POLLIN))
        .collect();
    let t = TimeSpec::from_duration(timeout.min(MAX_WAIT));
    match ppoll(&mut pfds, Some(t), None) {
        Ok(_) => {}
        Err(nix::errno::Errno::EINTR) => return Ok(0),
        Err(e) => return Err(e.into()),
    }
    Ok(pfds
        .iter()
        .enumerate()
        .filter(|(_, p)| p.revents().is_some_and(|r| !r.is_empty()))
        .fold(0, |m, (i, _)| m | 1 << i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn times_out_then_sees_data() {
        let (mut a, b) = UnixStream::pair().unwrap();
        assert!(!wait_readable(&b, Duration::from_millis(10)).unwrap());
        a.write_all(b"x").unwrap();
        assert!(wait_readable(&b, Duration::from_millis(1000)).unwrap());
        let (c, d) = UnixStream::pair().unwrap();
        assert!(
            wait_any(&[&d, &b], Duration::from_millis(10)).unwrap(),
            "b is readable"
        );
        assert_eq!(
            wait_ready(&[&d, &b], Duration::from_millis(10)).unwrap(),
            0b10,
            "only b (index 1) is readable"
        );
        drop(c);
        let (_e, f) = UnixStream::pair().unwrap();
        assert!(!wait_any(&[&f], Duration::from_millis(10)).unwrap());
    }

    /// A wait under a millisecond sleeps for it (`poll(2)`'s millisecond timeout made it 0 ms:
    /// a spin). Only the lower bound is asserted, which is exact: the kernel never ends a timed
    /// wait early; a loaded machine may run the thread late.
    #[test]
    fn sub_millisecond_waits_sleep_their_time() {
        let (_a, b) = UnixStream::pair().unwrap();
        let t = std::time::Instant::now();
        assert_eq!(wait_ready(&[&b], Duration::from_micros(300)).unwrap(), 0);
        assert!(
            t.elapsed() >= Duration::from_micros(300),
            "{:?}",
            t.elapsed()
        );
        let t = std::time::Instant::now();
        for _ in 0..20 {
            assert_eq!(wait_ready(&[&b], Duration::from_micros(300)).unwrap(), 0);
        }
        assert!(t.elapsed() >= Duration::from_millis(6), "{:?}", t.elapsed());
        // A zero timeout only looks.
        assert_eq!(wait_ready(&[&b], Duration::ZERO).unwrap(), 0);
        // Too many descriptors is refused, not truncated.
        let many: Vec<&dyn AsFd> = vec![&b; MAX_WAIT_FDS + 1];
        assert!(wait_ready(&many, Duration::ZERO).is_err());
    }
}
