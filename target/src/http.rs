//! The Prometheus scrape endpoint: a minimal HTTP/1.1 server on std's `TcpListener` that answers
//! `GET /metrics` (and `HEAD`) with the text the daemon's render function produces.
//!
//! Scope, on purpose: one request per connection (`Connection: close`), one connection at a
//! time, no keep-alive, no chunked bodies, request bodies never read. Every exchange has a
//! [`CLIENT_TIMEOUT`] deadline and request heads are capped at [`MAX_HEAD_BYTES`], so a slow or
//! hostile client delays a scrape by at most the deadline and cannot wedge the endpoint. The
//! accept loop is non-blocking and wakes every [`POLL_INTERVAL`], so dropping the server stops
//! it promptly. Answers: 200 for `/metrics` (query ignored), 404 for other paths, 405 (with
//! `Allow`) for other methods, 400 for anything that is not an HTTP/1.x request line, 408 when
//! the head does not arrive in time, 431 when it is too long, 500 if rendering panics.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The content type of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The longest request head (request line and headers) read.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// How long a client has to send its request head and take the answer.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the idle accept loop looks for a connection or a stop request.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Longest single blocking read, so a stop request is seen promptly.
const READ_SLICE: Duration = Duration::from_millis(100);

/// Produces the metrics text for one scrape.
pub type RenderFn = Arc<dyn Fn() -> String + Send + Sync>;

/// The running metrics endpoint. Dropping it stops the thread and closes the port.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl MetricsServer {
    /// Binds `addr` (port 0 picks one; see [`MetricsServer::local_addr`]) and serves `render`'s
    /// output on a thread of its own.
    pub fn start(addr: SocketAddr, render: RenderFn) -> io::Result<MetricsServer> {
        MetricsServer::start_with_timeout(addr, render, CLIENT_TIMEOUT)
    }

    fn start_with_timeout(
        addr: SocketAddr,
        render: RenderFn,
        timeout: Duration,
    ) -> io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("raidline-metrics".into())
                .spawn(move || serve(&listener, &*render, &stop, timeout))?
        };
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    listener: &TcpListener,
    render: &(dyn Fn() -> String + Send + Sync),
    stop: &AtomicBool,
    timeout: Duration,
) {
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((stream, _)) => serve_one(stream, render, stop, timeout),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // WouldBlock: nothing pending; anything else (EMFILE, ECONNABORTED) is transient:
            // back off instead of spinning.
            Err(_) => std::thread::sleep(POLL_INTERVAL),
        }
    }
}

/// An answer: status line, extra headers, body, whether to send the body (not for HEAD).
struct Answer {
    status: &'static str,
    extra: &'static str,
    body: String,
    send_body: bool,
}

impl Answer {
    fn error(status: &'static str, why: &str) -> Answer {
        Answer {
            status,
            extra: "",
            body: format!("{why}\n"),
            send_body: true,
        }
    }
}

fn serve_one(
    mut stream: TcpStream,
    render: &(dyn Fn() -> String + Send + Sync),
    stop: &AtomicBool,
    timeout: Duration,
) {
    let configured = stream.set_nonblocking(false).is_ok()
        && stream.set_read_timeout(Some(READ_SLICE)).is_ok()
        && stream.set_write_timeout(Some(timeout)).is_ok();
    if !configured {
        return;
    }
    let answer = match read_head(&mut stream, stop, timeout) {
        Ok(head) => route(&head, render),
        Err(Head::TooLong) => Answer::error(
            "431 Request Header Fields Too Large",
            "request head too long",
        ),
        Err(Head::TimedOut) => Answer::error("408 Request Timeout", "request head incomplete"),
        Err(Head::Gone) => return,
    };
    let mut out = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
        answer.status,
        if answer.status.starts_with("200") {
            CONTENT_TYPE
        } else {
            "text/plain; charset=utf-8"
        },
        answer.body.len(),
        answer.extra
    );
    if answer.send_body {
        out.push_str(&answer.body);
    }
    // The scraper may be gone; nothing to do about it.
    let _ = stream.write_all(out.as_bytes());
    let _ = stream.flush();
}

/// Why no request head came.
enum Head {
    TooLong,
    TimedOut,
    /// Closed, failed, or the server is stopping: nothing to answer.
    Gone,
}

/// Reads up to the blank line that ends the head; returns the head without it.
fn read_head(
    stream: &mut TcpStream,
    stop: &AtomicBool,
    timeout: Duration,
) -> Result<Vec<u8>, Head> {
    let deadline = Instant::now() + timeout;
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        match head_end(&head) {
            Some(end) if end <= MAX_HEAD_BYTES => {
                head.truncate(end);
                return Ok(head);
            }
            Some(_) => return Err(Head::TooLong),
            None => {}
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(Head::TooLong);
        }
        if stop.load(Ordering::Acquire) {
            return Err(Head::Gone);
        }
        if Instant::now() >= deadline {
            return Err(Head::TimedOut);
        }
        match stream.read(&mut chunk) {
            // EOF before the blank line: answer what came (a bare request line is common
            // from hand-typed clients); an empty connection gets nothing.
            Ok(0) if head.is_empty() => return Err(Head::Gone),
            Ok(0) => return Ok(head),
            Ok(n) => head.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return Err(Head::Gone),
        }
    }
}

/// Where the head ends (before "\r\n\r\n" or "\n\n"), if it has.
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = buf.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn route(head: &[u8], render: &(dyn Fn() -> String + Send + Sync)) -> Answer {
    let Some((method, path)) = request_line(head) else {
        return Answer::error("400 Bad Request", "not an HTTP/1.x request");
    };
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            return Answer {
                extra: "Allow: GET, HEAD\r\n",
                ..Answer::error("405 Method Not Allowed", "only GET and HEAD")
            }
        }
    };
    let path = path.split(['?', '#']).next().unwrap_or(path);
    if path != "/metrics" {
        return Answer::error("404 Not Found", "metrics are at /metrics");
    }
    match catch_unwind(AssertUnwindSafe(render)) {
        Ok(body) => Answer {
            status: "200 OK",
            extra: "",
            body,
            send_body: !head_only,
        },
        Err(_) => Answer::error(
            "500 Internal Server Error",
            "rendering the metrics failed (see the daemon's log)",
        ),
    }
}

/// Method and request target of a well-formed `METHOD SP TARGET SP HTTP/1.x` line.
fn request_line(head: &[u8]) -> Option<(&str, &str)> {
    let line = head.split(|&b| b == b'\n').next()?;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    let version_ok = matches!(version, "HTTP/1.0" | "HTTP/1.1");
    let target_ok = target.starts_with('/') && !target.bytes().any(|b| b.is_ascii_control());
    (parts.next().is_none() && token(method) && target_ok && version_ok).then_some((method, target))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn server() -> (MetricsServer, Arc<AtomicU64>) {
        let scrapes = Arc::new(AtomicU64::new(0));
        let s = Arc::clone(&scrapes);
        let render: RenderFn = Arc::new(move || {
            let n = s.fetch_add(1, Ordering::Relaxed) + 1;
            format!("# HELP x_total X.\n# TYPE x_total counter\nx_total {n}\n")
        });
        let srv = MetricsServer::start("127.0.0.1:0".parse().unwrap(), render).unwrap();
        (srv, scrapes)
    }

    /// Sends `req` and returns (status line, headers, body).
    fn exchange(addr: SocketAddr, req: &[u8]) -> (String, Vec<String>, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(req).unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
        let mut lines = head.split("\r\n").map(str::to_owned);
        let status = lines.next().unwrap();
        (status, lines.collect(), body.to_owned())
    }

    fn header<'a>(headers: &'a [String], name: &str) -> Option<&'a str> {
        headers.iter().find_map(|h| {
            let (k, v) = h.split_once(": ")?;
            k.eq_ignore_ascii_case(name).then_some(v)
        })
    }

    #[test]
    fn get_metrics_answers_the_rendered_text() {
        let (srv, scrapes) = server();
        let (status, headers, body) = exchange(
            srv.local_addr(),
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
        );
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(header(&headers, "content-type"), Some(CONTENT_TYPE));
        assert!(CONTENT_TYPE.starts_with("text/plain; version=0.0.4"));
        assert_eq!(
            body,
            "# HELP x_total X.\n# TYPE x_total counter\nx_total 1\n"
        );
        assert_eq!(
            header(&headers, "content-length"),
            Some(&*body.len().to_string())
        );
        assert_eq!(header(&headers, "connection"), Some("close"));
        // Each scrape renders afresh; a query string is ignored; bare LF line ends work.
        let (status, _, body) = exchange(srv.local_addr(), b"GET /metrics?x=1 HTTP/1.0\n\n");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(body.ends_with("x_total 2\n"), "{body}");
        assert_eq!(scrapes.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn head_sends_headers_only() {
        let (srv, _) = server();
        let (status, headers, body) = exchange(srv.local_addr(), b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(body.is_empty());
        assert_ne!(header(&headers, "content-length"), Some("0"));
    }

    #[test]
    fn wrong_path_method_and_garbage() {
        let (srv, scrapes) = server();
        let a = srv.local_addr();
        assert_eq!(
            exchange(a, b"GET / HTTP/1.1\r\n\r\n").0,
            "HTTP/1.1 404 Not Found"
        );
        assert_eq!(
            exchange(a, b"GET /metricsx HTTP/1.1\r\n\r\n").0,
            "HTTP/1.1 404 Not Found"
        );
        let (status, headers, _) =
            exchange(a, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
        assert_eq!(header(&headers, "allow"), Some("GET, HEAD"));
        for bad in [
            &b"hello\r\n\r\n"[..],
            b"GET /metrics\r\n\r\n",
            b"GET /metrics HTTP/2.0\r\n\r\n",
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"G(T /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 extra\r\n\r\n",
            b"\xff\xfe /metrics HTTP/1.1\r\n\r\n",
        ] {
            let (status, headers, _) = exchange(a, bad);
            assert_eq!(status, "HTTP/1.1 400 Bad Request", "{bad:?}");
            assert_eq!(
                header(&headers, "content-type"),
                Some("text/plain; charset=utf-8")
            );
        }
        assert_eq!(scrapes.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn oversized_head_is_refused() {
        let (srv, _) = server();
        // At the limit is fine.
        let mut req = b"GET /metrics HTTP/1.1\r\nX-Junk: ".to_vec();
        req.resize(MAX_HEAD_BYTES, b'a');
        req.extend_from_slice(b"\r\n\r\n");
        assert_eq!(exchange(srv.local_addr(), &req).0, "HTTP/1.1 200 OK");
        let mut req = b"GET /metrics HTTP/1.1\r\nX-Junk: ".to_vec();
        req.extend(std::iter::repeat(b'a').take(MAX_HEAD_BYTES + 100));
        req.extend_from_slice(b"\r\n\r\n");
        let (status, _, _) = exchange(srv.local_addr(), &req);
        assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
        assert_eq!(
            exchange(srv.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n").0,
            "HTTP/1.1 200 OK"
        );
    }

    #[test]
    fn a_silent_client_delays_at_most_the_deadline() {
        let render: RenderFn = Arc::new(|| "ok 1\n".to_owned());
        let srv = MetricsServer::start_with_timeout(
            "127.0.0.1:0".parse().unwrap(),
            render,
            Duration::from_millis(300),
        )
        .unwrap();
        let mut silent = TcpStream::connect(srv.local_addr()).unwrap();
        silent.write_all(b"GET /metr").unwrap();
        let t0 = Instant::now();
        let (status, _, body) = exchange(srv.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(
            (status.as_str(), body.as_str()),
            ("HTTP/1.1 200 OK", "ok 1\n")
        );
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        let mut text = String::new();
        silent.read_to_string(&mut text).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
            "{text}"
        );
    }

    #[test]
    fn a_panicking_renderer_is_a_500() {
        let render: RenderFn = Arc::new(|| panic!("renderer bug"));
        let srv = MetricsServer::start("127.0.0.1:0".parse().unwrap(), render).unwrap();
        let (status, _, _) = exchange(srv.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status, "HTTP/1.1 500 Internal Server Error");
        let (status, _, _) = exchange(srv.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status, "HTTP/1.1 500 Internal Server Error");
    }

    #[test]
    fn drop_stops_promptly_and_frees_the_port() {
        let (srv, _) = server();
        let addr = srv.local_addr();
        let _idle = TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let t0 = Instant::now();
        drop(srv);
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        let err = TcpStream::connect(addr).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
        // Binding the same address again works.
        let render: RenderFn = Arc::new(String::new);
        drop(MetricsServer::start(addr, render).unwrap());
    }

    #[test]
    fn a_taken_port_is_an_error() {
        let (srv, _) = server();
        let render: RenderFn = Arc::new(String::new);
        let err = MetricsServer::start(srv.local_addr(), render).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    }
}
