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
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `pfds` is a live, initialised array of exactly `pfds.len()` pollfds for the whole
    // call; the descriptors' owners are borrowed for the call (a stale number would only be
    // reported as POLLNVAL).
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(r > 0)
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
        drop(c);
        let (_e, f) = UnixStream::pair().unwrap();
        assert!(!wait_any(&[&f], Duration::from_millis(10)).unwrap());
    }
}
