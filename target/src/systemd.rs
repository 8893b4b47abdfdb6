//! systemd service notifications (`sd_notify(3)`): READY=1 once listening, WATCHDOG=1 from the
//! control loop, STOPPING=1 on shutdown, STATUS= for `systemctl status`. Spoken directly over
//! the datagram socket named by `$NOTIFY_SOCKET` (path or Linux abstract name), so no libsystemd
//! is needed. Outside systemd (no `$NOTIFY_SOCKET`) every call is a no-op.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// A connection to the service manager, if the process runs under one.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// Reads `$NOTIFY_SOCKET` and `$WATCHDOG_USEC` (only the binary's `main` calls this).
    pub fn from_env() -> io::Result<Notifier> {
        let socket = std::env::var_os("NOTIFY_SOCKET");
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&us| us > 0)
            .map(Duration::from_micros);
        Notifier::new(socket.as_deref().and_then(|s| s.to_str()), watchdog)
    }

    /// A notifier for the given socket name (`@name` = abstract) and watchdog interval.
    pub fn new(socket: Option<&str>, watchdog: Option<Duration>) -> io::Result<Notifier> {
        let target = match socket {
            None | Some("") => None,
            Some(name) => {
                let addr = match name.strip_prefix('@') {
                    Some(abs) => SocketAddr::from_abstract_name(abs.as_bytes())?,
                    None => SocketAddr::from_pathname(name)?,
                };
                Some((UnixDatagram::unbound()?, addr))
            }
        };
        Ok(Notifier { target, watchdog })
    }

    /// How often to send WATCHDOG=1: half the interval systemd enforces, or `None`.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog.map(|d| d / 2)
    }

    fn send(&self, msg: &str) -> io::Result<()> {
        match &self.target {
            Some((sock, addr)) => sock.send_to_addr(msg.as_bytes(), addr).map(|_| ()),
            None => Ok(()),
        }
    }

    /// READY=1 with a status line: the daemon is listening and serving.
    pub fn ready(&self, status: &str) -> io::Result<()> {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)))
    }

    /// WATCHDOG=1: the control loop is alive.
    pub fn watchdog(&self) -> io::Result<()> {
        self.send("WATCHDOG=1")
    }

    /// STOPPING=1: shutdown has begun (draining I/O, marking arrays clean).
    pub fn stopping(&self, status: &str) -> io::Result<()> {
        self.send(&format!("STOPPING=1\nSTATUS={}", one_line(status)))
    }

    /// STATUS=…: a line for `systemctl status`.
    pub fn status(&self, status: &str) -> io::Result<()> {
        self.send(&format!("STATUS={}", one_line(status)))
    }
}

fn one_line(s: &str) -> String {
    s.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_reach_the_socket() {
        let dir = std::env::temp_dir().join(format!("rl-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let server = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::new(path.to_str(), Some(Duration::from_secs(20))).unwrap();
        assert_eq!(n.watchdog_interval(), Some(Duration::from_secs(10)));
        n.ready("serving 1 subsystem\non 1 port").unwrap();
        n.watchdog().unwrap();
        let mut buf = [0u8; 256];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(
            &buf[..len],
            b"READY=1\nSTATUS=serving 1 subsystem on 1 port"
        );
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_socket_is_a_no_op() {
        let n = Notifier::new(None, None).unwrap();
        n.ready("x").unwrap();
        assert_eq!(n.watchdog_interval(), None);
    }
}
