//! The management socket's server ([`MgmtServer`]) and client ([`call`]).
//!
//! The server thread sleeps in `poll(2)` on a non-blocking listener (a client wakes it, and so
//! does `Drop`, which raises the stop flag and connects once; a timeout every [`IDLE_WAIT`] is
//! the backstop should that connection fail), serves one
//! connection at a time, and reads each request in short slices against a [`CLIENT_TIMEOUT`]
//! deadline, so neither a silent client nor a shutdown waits on the other. The socket file is
//! the server's: it is created 0660, removed on `Drop` — unless something else has replaced it
//! meanwhile — and a stale one left by a crashed daemon is replaced at start, while a live one
//! is refused.

use std::fs::{self, DirBuilder, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use raidline_fabric::sys_poll::wait_readable;

use super::{
    dispatch, Management, MgmtError, Request, Response, CLIENT_TIMEOUT, MAX_REQUEST_BYTES,
};

/// How long the idle server thread sleeps on the listening socket before it looks at the stop
/// flag again (a connection wakes it at once, `Drop`'s included). Long: in the lab's emulated
/// guest, waking 5 times a second cost about 1 % of a CPU.
const IDLE_WAIT: Duration = Duration::from_secs(5);

/// Back-off after an accept error other than "nothing pending" (EMFILE, ENOBUFS).
const ERROR_BACKOFF: Duration = Duration::from_millis(50);

/// Longest single blocking read while a request arrives, so a stop request is seen promptly.
const READ_SLICE: Duration = Duration::from_millis(100);

/// The largest answer the client accepts (a status report of many controllers stays far below).
const MAX_RESPONSE_BYTES: u64 = 16 << 20;

/// The running management socket. Dropping it stops the thread and removes the socket file.
#[derive(Debug)]
pub struct MgmtServer {
    path: PathBuf,
    /// (device, inode) of the socket file this server bound.
    identity: (u64, u64),
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MgmtServer {
    /// Binds `path` and serves `api` on a thread of its own.
    ///
    /// Creates the parent directory if missing; refuses when a daemon answers on `path`
    /// ([`MgmtError::AlreadyRunning`]) or when `path` is not a socket; replaces a stale socket.
    pub fn start(path: &Path, api: Arc<dyn Management>) -> Result<MgmtServer, MgmtError> {
        MgmtServer::start_with_timeout(path, api, CLIENT_TIMEOUT)
    }

    /// [`MgmtServer::start`] with another per-client deadline (tests use a short one).
    pub(super) fn start_with_timeout(
        path: &Path,
        api: Arc<dyn Management>,
        client_timeout: Duration,
    ) -> Result<MgmtServer, MgmtError> {
        let setup = |source| MgmtError::Setup {
            path: path.to_owned(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(parent)
                .map_err(setup)?;
        }
        match fs::symlink_metadata(path) {
            Ok(meta) if !meta.file_type().is_socket() => {
                return Err(MgmtError::NotASocket {
                    path: path.to_owned(),
                });
            }
            Ok(_) => match UnixStream::connect(path) {
                Ok(_) => {
                    return Err(MgmtError::AlreadyRunning {
                        path: path.to_owned(),
                    });
                }
                // Nobody listens: left behind by a daemon that did not stop cleanly.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    fs::remove_file(path).map_err(setup)?;
                }
                Err(e) => return Err(setup(e)),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(setup(e)),
        }
        let listener = UnixListener::bind(path).map_err(setup)?;
        let bound = (|| {
            fs::set_permissions(path, Permissions::from_mode(0o660))?;
            listener.set_nonblocking(true)?;
            let meta = fs::symlink_metadata(path)?;
            Ok((meta.dev(), meta.ino()))
        })();
        let identity = match bound {
            Ok(id) => id,
            Err(e) => {
                let _ = fs::remove_file(path);
                return Err(setup(e));
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("raidline-mgmt".into())
                .spawn(move || serve(&listener, &*api, &stop, client_timeout))
        };
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                let _ = fs::remove_file(path);
                return Err(setup(e));
            }
        };
        Ok(MgmtServer {
            path: path.to_owned(),
            identity,
            stop,
            thread: Some(thread),
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for MgmtServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the thread from its wait on the listener: it serves this connection (it closes
        // at once) and then sees the flag.
        drop(UnixStream::connect(&self.path));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Remove the file only if it is still the one this server bound.
        let ours = fs::symlink_metadata(&self.path)
            .is_ok_and(|meta| (meta.dev(), meta.ino()) == self.identity);
        if ours {
            let _ = fs::remove_file(&self.path);
        }
    }
}

fn serve(listener: &UnixListener, api: &dyn Management, stop: &AtomicBool, timeout: Duration) {
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((stream, _)) => serve_one(stream, api, stop, timeout),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Nothing pending: sleep until a client connects (each accept attempt allocates
            // and frees a socket in the kernel, so this is not a polling loop).
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let _ = wait_readable(listener, IDLE_WAIT);
            }
            // Anything else (EMFILE, ENOBUFS) is transient for a listener; back off instead of
            // spinning.
            Err(_) => std::thread::sleep(ERROR_BACKOFF),
        }
    }
}

/// Why no request line came.
enum NoRequest {
    /// The client closed without sending anything.
    Empty,
    /// The line exceeds [`MAX_REQUEST_BYTES`].
    TooLong,
    /// No complete line within the client deadline.
    TimedOut,
    /// The server is stopping.
    Stopping,
    /// The connection failed.
    Io,
}

fn serve_one(mut stream: UnixStream, api: &dyn Management, stop: &AtomicBool, timeout: Duration) {
    let configured = stream.set_nonblocking(false).is_ok()
        && stream.set_read_timeout(Some(READ_SLICE)).is_ok()
        && stream.set_write_timeout(Some(timeout)).is_ok();
    if !configured {
        return;
    }
    let response = match read_request(&mut stream, stop, timeout) {
        Ok(line) => answer(api, &line),
        Err(NoRequest::TooLong) => bad(&format!(
            "request line longer than {MAX_REQUEST_BYTES} bytes"
        )),
        Err(NoRequest::TimedOut) => bad(&format!("no complete request line within {timeout:?}")),
        Err(NoRequest::Empty | NoRequest::Stopping | NoRequest::Io) => return,
    };
    // A Response always serializes: non-finite floats become null, which the client accepts.
    if let Ok(mut out) = serde_json::to_vec(&response) {
        out.push(b'\n');
        // The client may be gone; nothing to do about it.
        let _ = stream.write_all(&out);
    }
}

fn read_request(
    stream: &mut UnixStream,
    stop: &AtomicBool,
    timeout: Duration,
) -> Result<Vec<u8>, NoRequest> {
    let deadline = Instant::now() + timeout;
    let mut line = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if stop.load(Ordering::Acquire) {
            return Err(NoRequest::Stopping);
        }
        if Instant::now() >= deadline {
            return Err(NoRequest::TimedOut);
        }
        match stream.read(&mut chunk) {
            Ok(0) if line.is_empty() => return Err(NoRequest::Empty),
            // EOF after a request without its newline: take it as the line.
            Ok(0) => return Ok(line),
            Ok(n) => {
                let got = &chunk[..n];
                let newline = got.iter().position(|&b| b == b'\n');
                line.extend_from_slice(&got[..newline.unwrap_or(n)]);
                if line.len() > MAX_REQUEST_BYTES {
                    return Err(NoRequest::TooLong);
                }
                if newline.is_some() {
                    return Ok(line);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return Err(NoRequest::Io),
        }
    }
}

fn answer(api: &dyn Management, line: &[u8]) -> Response {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let req: Request = match serde_json::from_slice(line) {
        Ok(r) => r,
        Err(e) => return bad(&e.to_string()),
    };
    // A panicking handler must not take the management socket down with it.
    catch_unwind(AssertUnwindSafe(|| dispatch(api, &req))).unwrap_or_else(|_| Response {
        ok: false,
        message: "internal error: the daemon's handler panicked (see the daemon's log)".into(),
        status: None,
    })
}

fn bad(why: &str) -> Response {
    Response {
        ok: false,
        message: format!("bad request: {why}"),
        status: None,
    }
}

/// Sends `req` to the daemon at `path` and waits at most `timeout` for the answer.
pub fn call(path: &Path, req: &Request, timeout: Duration) -> Result<Response, MgmtError> {
    let exchange = |source| MgmtError::Exchange {
        path: path.to_owned(),
        source,
    };
    let timeout = timeout.max(Duration::from_millis(1));
    let deadline = Instant::now() + timeout;
    let mut stream = UnixStream::connect(path).map_err(|source| MgmtError::Unreachable {
        path: path.to_owned(),
        source,
    })?;
    stream.set_write_timeout(Some(timeout)).map_err(exchange)?;
    let mut out = serde_json::to_vec(req).map_err(|e| exchange(e.into()))?;
    out.push(b'\n');
    stream.write_all(&out).map_err(exchange)?;

    let mut answer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(exchange(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer within {timeout:?}"),
            )));
        }
        stream.set_read_timeout(Some(left)).map_err(exchange)?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&chunk[..n]);
                if answer.contains(&b'\n') {
                    break;
                }
                if answer.len() as u64 > MAX_RESPONSE_BYTES {
                    return Err(MgmtError::BadResponse {
                        path: path.to_owned(),
                        message: format!("longer than {MAX_RESPONSE_BYTES} bytes"),
                    });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(exchange(e)),
        }
    }
    let line = answer.split(|&b| b == b'\n').next().unwrap_or_default();
    if line.is_empty() {
        return Err(MgmtError::BadResponse {
            path: path.to_owned(),
            message: "the connection closed without an answer".into(),
        });
    }
    serde_json::from_slice(line).map_err(|e| MgmtError::BadResponse {
        path: path.to_owned(),
        message: e.to_string(),
    })
}
