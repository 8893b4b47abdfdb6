//! Waiting for a file descriptor (a completion channel, the RDMA CM event channel) to become
//! readable, with a timeout: the one `poll(2)` call the target's threads sleep in.
#![allow(unsafe_code)]

use std::os::fd::AsRawFd;
use std::time::Duration;

/// Waits until `fd` is readable or `timeout` passes. `Ok(true)`: readable (or hung up, which a
/// read then reports); `Ok(false)`: timed out or interrupted by a signal.
/// `fd` is anything that owns a descriptor (a CQ, the CM, a socket), borrowed for the call.
pub fn wait_readable(fd: &impl AsRawFd, timeout: Duration) -> std::io::Result<bool> {
    wait_any(&[fd as &dyn AsRawFd], timeout)
}

/// Waits until any of `fds` is readable or `timeout` passes; `Ok(true)` when one is.
pub fn wait_any(fds: &[&dyn AsRawFd], timeout: Duration) -> std::io::Result<bool> {
    Ok(wait_ready(fds, timeout)? != 0)
}

/// Most descriptors [`wait_ready`] takes (one bit each in its answer).
pub const MAX_WAIT_FDS: usize = 8;

/// Waits until any of `fds` is readable (or reports an error or hang-up) or `timeout` passes,
/// and says which: bit `i` of the answer is set when `fds[i]` is; 0 after a timeout or a
/// signal. Callers skip the read that would only answer `EAGAIN` on the others (a syscall
/// each, expensive where every system call is emulated). At most [`MAX_WAIT_FDS`] descriptors.
pub fn wait_ready(fds: &[&dyn AsRawFd], timeout: Duration) -> std::io::Result<u32> {
    if fds.len() > MAX_WAIT_FDS {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("wait_ready takes at most {MAX_WAIT_FDS} descriptors"),
        ));
    }
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; MAX_WAIT_FDS];
    for (p, f) in pfds.iter_mut().zip(fds) {
        p.fd = f.as_raw_fd();
        p.events = libc::POLLIN;
    }
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `pfds` is a live, initialised array of at least `fds.len()` pollfds for the whole
    // call and only that many are passed; the descriptors' owners are borrowed for the call (a
    // stale number would only be reported as POLLNVAL).
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(pfds[..fds.len()]
        .iter()
        .enumerate()
        .filter(|(_, p)| p.revents != 0)
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
