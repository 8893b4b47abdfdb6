//! Waiting for a file descriptor (a completion channel, the RDMA CM event channel) to become
//! readable, with a timeout: the one `poll(2)` call the target's threads sleep in (nix's safe
//! wrapper: the descriptors are borrowed for the call, `AsFd`).

use std::os::fd::AsFd;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

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

/// Waits until any of `fds` is readable (or reports an error or hang-up) or `timeout` passes,
/// and says which: bit `i` of the answer is set when `fds[i]` is; 0 after a timeout or a
/// signal. Callers skip the read that would only answer `EAGAIN` on the others (a syscall
/// each, expensive where every system call is emulated). At most [`MAX_WAIT_FDS`] descriptors.
pub fn wait_ready(fds: &[&dyn AsFd], timeout: Duration) -> std::io::Result<u32> {
    if fds.len() > MAX_WAIT_FDS {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("wait_ready takes at most {MAX_WAIT_FDS} descriptors"),
        ));
    }
    let mut pfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|f| PollFd::new(f.as_fd(), PollFlags::POLLIN))
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    let t = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
    match poll(&mut pfds, t) {
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
}
