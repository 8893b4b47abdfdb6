//! The Prometheus scrape endpoint on tiny_http: `GET /metrics` (and `HEAD`) answered with the
//! text the daemon's render function produces.
//!
//! tiny_http reads each connection's request on a thread of its own, so a client that connects
//! and sends nothing, or sends slowly, holds only its own connection: [`WORKERS`] threads take
//! the requests that arrived and render them, so one slow scrape does not hold up another
//! either. Rendering reads the lock-free counters and takes the daemon's status snapshot; the
//! data path never waits for it. Answers: 200 for `/metrics` (query ignored), 404 for other
//! paths, 405 (with `Allow`) for other methods, 500 if rendering panics; malformed requests are
//! answered by tiny_http (400, 505).

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tiny_http::{Header, Method, Request, Response, Server};

/// The content type of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Threads answering requests (each renders one scrape at a time).
pub const WORKERS: usize = 2;

/// How long a worker waits before trying again after the listener failed.
const ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Produces the metrics text for one scrape.
pub type RenderFn = Arc<dyn Fn() -> String + Send + Sync>;

/// The running metrics endpoint. Dropping it stops the threads and closes the port.
pub struct MetricsServer {
    addr: SocketAddr,
    server: Arc<Server>,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
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
    /// output on threads of its own.
    pub fn start(addr: SocketAddr, render: RenderFn) -> io::Result<MetricsServer> {
        // Bound here, so a taken port is the io::Error the caller reports.
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let server = Server::from_listener(listener, None)
            .map_err(|e| io::Error::other(format!("metrics endpoint on {addr}: {e}")))?;
        let server = Arc::new(server);
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::with_capacity(WORKERS);
        for i in 0..WORKERS {
            let (srv, halt, render) = (server.clone(), stop.clone(), render.clone());
            let t = std::thread::Builder::new()
                .name(format!("raidline-metrics-{i}"))
                .spawn(move || serve(&srv, &*render, &halt));
            match t {
                Ok(t) => workers.push(t),
                Err(e) => {
                    stop.store(true, Ordering::Release);
                    server.unblock();
                    return Err(e);
                }
            }
        }
        Ok(MetricsServer {
            addr,
            server,
            stop,
            workers,
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
        for _ in &self.workers {
            self.server.unblock();
        }
        for t in self.workers.drain(..) {
            let _ = t.join();
        }
    }
}

/// Answers requests until stopped. An idle worker sleeps in `recv` until a request comes or
/// the server is dropped ([`Server::unblock`] once per worker): no periodic wake-ups, which
/// cost about 1 % of a CPU per worker in the lab's emulated guest at 10 a second.
fn serve(server: &Server, render: &(dyn Fn() -> String + Send + Sync), stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        match server.recv() {
            Ok(req) => answer(req, render),
            // Unblocked (stopping: the flag is up), or the listener failed: back off.
            Err(_) if stop.load(Ordering::Acquire) => break,
            Err(_) => std::thread::sleep(ERROR_BACKOFF),
        }
    }
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .unwrap_or_else(|()| unreachable!("the header names and values here are ASCII"))
}

fn answer(req: Request, render: &(dyn Fn() -> String + Send + Sync)) {
    let plain = |code: u16, body: &str| {
        Response::from_string(format!("{body}\n"))
            .with_status_code(code)
            .with_header(header("Content-Type", "text/plain; charset=utf-8"))
    };
    let response = match req.method() {
        Method::Get | Method::Head => {
            let path = req.url().split(['?', '#']).next().unwrap_or("");
            if path != "/metrics" {
                plain(404, "metrics are at /metrics")
            } else {
                match catch_unwind(AssertUnwindSafe(render)) {
                    // tiny_http leaves the body out for HEAD and keeps its Content-Length.
                    Ok(body) => Response::from_string(body)
                        .with_status_code(200)
                        .with_header(header("Content-Type", CONTENT_TYPE)),
                    Err(_) => plain(500, "rendering the metrics failed (see the daemon's log)"),
                }
            }
        }
        _ => plain(405, "only GET and HEAD").with_header(header("Allow", "GET, HEAD")),
    };
    // The scraper may be gone; nothing to do about it.
    let _ = req.respond(response);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::atomic::AtomicU64;
    use std::time::Instant;

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

    /// Sends `req` (which asks for the connection to close) and returns (status line, headers,
    /// body).
    fn exchange(addr: SocketAddr, req: &[u8]) -> (String, Vec<String>, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(req).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)
            .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(req)));
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
        let mut lines = head.split("\r\n").map(str::to_owned);
        let status = lines.next().unwrap();
        (status, lines.collect(), body.to_owned())
    }

    /// The first line of whatever the server answers to `req` within a second (empty when it
    /// closes without an answer).
    fn first_line(addr: SocketAddr, req: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        s.write_all(req).unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&raw).into_owned();
        text.lines().next().unwrap_or("").to_owned()
    }

    fn header_of<'a>(headers: &'a [String], name: &str) -> Option<&'a str> {
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
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(header_of(&headers, "content-type"), Some(CONTENT_TYPE));
        assert!(CONTENT_TYPE.starts_with("text/plain; version=0.0.4"));
        assert_eq!(
            body,
            "# HELP x_total X.\n# TYPE x_total counter\nx_total 1\n"
        );
        assert_eq!(
            header_of(&headers, "content-length"),
            Some(&*body.len().to_string())
        );
        // Each scrape renders afresh; a query string is ignored; HTTP/1.0 closes by itself.
        let (status, _, body) = exchange(srv.local_addr(), b"GET /metrics?x=1 HTTP/1.0\r\n\r\n");
        assert!(status.ends_with("200 OK"), "{status}");
        assert!(body.ends_with("x_total 2\n"), "{body}");
        assert_eq!(scrapes.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn head_sends_headers_only() {
        let (srv, _) = server();
        let (status, headers, body) = exchange(
            srv.local_addr(),
            b"HEAD /metrics HTTP/1.1\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(body.is_empty());
        assert_eq!(header_of(&headers, "content-type"), Some(CONTENT_TYPE));
    }

    #[test]
    fn wrong_path_method_and_garbage() {
        let (srv, scrapes) = server();
        let a = srv.local_addr();
        for path in ["/", "/metricsx"] {
            let req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n");
            assert_eq!(exchange(a, req.as_bytes()).0, "HTTP/1.1 404 Not Found");
        }
        let (status, headers, _) = exchange(
            a,
            b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
        assert_eq!(header_of(&headers, "allow"), Some("GET, HEAD"));
        for bad in [
            &b"hello\r\n\r\n"[..],
            b"GET /metrics HTTP/2.0\r\n\r\n",
            b"\xff\xfe /metrics HTTP/1.1\r\n\r\n",
        ] {
            let status = first_line(a, bad);
            assert!(
                status.is_empty() || status.contains(" 400 ") || status.contains(" 505 "),
                "{bad:?}: {status}"
            );
        }
        assert_eq!(scrapes.load(Ordering::Relaxed), 0);
    }

    /// Issue 20: a client that holds a connection open without sending anything, and one that
    /// sends half a request, stall no one: a scrape beside them is answered within 100 ms.
    #[test]
    fn a_silent_client_stalls_no_scrape() {
        let (srv, _) = server();
        let _silent = TcpStream::connect(srv.local_addr()).unwrap();
        let mut half = TcpStream::connect(srv.local_addr()).unwrap();
        half.write_all(b"GET /metr").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        for _ in 0..3 {
            let t0 = Instant::now();
            let (status, _, body) = exchange(
                srv.local_addr(),
                b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n",
            );
            let took = t0.elapsed();
            assert_eq!(status, "HTTP/1.1 200 OK");
            assert!(body.starts_with("# HELP x_total"));
            assert!(took < Duration::from_millis(100), "{took:?}");
        }
    }

    #[test]
    fn a_panicking_renderer_is_a_500() {
        let render: RenderFn = Arc::new(|| panic!("renderer bug"));
        let srv = MetricsServer::start("127.0.0.1:0".parse().unwrap(), render).unwrap();
        for _ in 0..2 {
            let (status, _, _) = exchange(
                srv.local_addr(),
                b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n",
            );
            assert_eq!(status, "HTTP/1.1 500 Internal Server Error");
        }
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
        // The address is free again within a second (tiny_http's accepting thread lets go of
        // the listener once it sees the stop).
        let render: RenderFn = Arc::new(String::new);
        let again = (0..20).find_map(|_| {
            MetricsServer::start(addr, render.clone())
                .map_err(|_| std::thread::sleep(Duration::from_millis(50)))
                .ok()
        });
        assert!(
            again.is_some(),
            "{addr} still taken a second after the drop"
        );
    }

    #[test]
    fn a_taken_port_is_an_error() {
        let (srv, _) = server();
        let render: RenderFn = Arc::new(String::new);
        let err = MetricsServer::start(srv.local_addr(), render).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    }
}
