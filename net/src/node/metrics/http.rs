//! The `/metrics` listener: a small blocking HTTP/1.1 server on threads of its own, never on the
//! raft thread (docs/architecture.md, "Metrics"). Bounded in every direction: at most
//! `max_connections` served at once (one more is answered 503 and closed), a request head of
//! at most `max_request_bytes` (431 beyond), `timeout` for reading the request and for writing
//! the answer, one request per connection. Only `GET /metrics` (and `HEAD`) is served: another
//! path is 404, another method 405, a request line that does not parse 400.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The OpenMetrics text format, which Prometheus asks for first.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    pub max_connections: usize,
    pub max_request_bytes: usize,
    pub timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_connections: 4,
            max_request_bytes: 8 << 10,
            timeout: Duration::from_secs(5),
        }
    }
}

type Renderer = Arc<dyn Fn() -> String + Send + Sync>;

/// The running listener; dropping it stops the accepting thread (connections being served
/// finish within their timeout).
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` and serves `render()`'s text at `/metrics`.
    pub fn start(addr: SocketAddr, limits: HttpLimits, render: Renderer) -> io::Result<Self> {
        assert!(limits.max_connections > 0 && limits.max_request_bytes >= 64);
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let active = Arc::new(AtomicUsize::new(0));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("ringraft-metrics".into())
                .spawn(move || accept_loop(listener, limits, render, stop, active))?
        };
        Ok(Self {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the blocking accept; it sees the flag and returns.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    limits: HttpLimits,
    render: Renderer,
    stop: Arc<AtomicBool>,
    active: Arc<AtomicUsize>,
) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else {
            // EMFILE and the like: wait a little rather than spin.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = stream.set_write_timeout(Some(limits.timeout));
        if active.fetch_add(1, Ordering::SeqCst) >= limits.max_connections {
            active.fetch_sub(1, Ordering::SeqCst);
            let mut stream = stream;
            let _ = write_status(
                &mut stream,
                503,
                "Service Unavailable",
                "too many connections\n",
            );
            continue;
        }
        let (render, slot) = (render.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name("ringraft-metrics-conn".into())
            .spawn(move || {
                serve(stream, limits, &render);
                slot.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// What a request head asked for.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    Metrics { head_only: bool },
    NotFound,
    MethodNotAllowed,
    BadRequest,
}

fn parse_request_line(head: &str) -> Parsed {
    let line = head.split("\r\n").next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Parsed::BadRequest;
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Parsed::BadRequest;
    }
    let path = target.split('?').next().unwrap_or(target);
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Parsed::MethodNotAllowed,
    };
    if path == "/metrics" {
        Parsed::Metrics { head_only }
    } else {
        Parsed::NotFound
    }
}

/// Reads the request head within the limits: Ok(None) when it is too large.
fn read_head(stream: &mut TcpStream, limits: HttpLimits) -> io::Result<Option<String>> {
    let deadline = Instant::now() + limits.timeout;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            if end + 4 > limits.max_request_bytes {
                return Ok(None);
            }
            return Ok(Some(String::from_utf8_lossy(&head[..end]).into_owned()));
        }
        if head.len() > limits.max_request_bytes {
            return Ok(None);
        }
    }
}

fn serve(mut stream: TcpStream, limits: HttpLimits, render: &Renderer) {
    let head = match read_head(&mut stream, limits) {
        Ok(Some(head)) => head,
        Ok(None) => {
            let _ = write_status(&mut stream, 431, "Request Header Fields Too Large", "");
            return;
        }
        Err(error)
            if error.kind() == io::ErrorKind::TimedOut
                || error.kind() == io::ErrorKind::WouldBlock =>
        {
            let _ = write_status(&mut stream, 408, "Request Timeout", "");
            return;
        }
        Err(_) => return,
    };
    let _ = match parse_request_line(&head) {
        Parsed::Metrics { head_only } => {
            let body = render();
            write_response(&mut stream, 200, "OK", CONTENT_TYPE, &body, head_only)
        }
        Parsed::NotFound => {
            write_status(&mut stream, 404, "Not Found", "only /metrics is served\n")
        }
        Parsed::MethodNotAllowed => write_status(&mut stream, 405, "Method Not Allowed", ""),
        Parsed::BadRequest => write_status(&mut stream, 400, "Bad Request", ""),
    };
}

fn write_status(stream: &mut TcpStream, code: u16, reason: &str, body: &str) -> io::Result<()> {
    write_response(
        stream,
        code,
        reason,
        "text/plain; charset=utf-8",
        body,
        false,
    )
}

fn write_response(
    stream: &mut TcpStream,
    code: u16,
    reason: &str,
    content_type: &str,
    body: &str,
    head_only: bool,
) -> io::Result<()> {
    let allow = if code == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         {allow}Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(body.as_bytes())?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(limits: HttpLimits) -> MetricsServer {
        let render: Renderer = Arc::new(|| "# TYPE up gauge\nup 1\n# EOF\n".to_string());
        MetricsServer::start("127.0.0.1:0".parse().unwrap(), limits, render).unwrap()
    }

    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request).unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
    }

    fn status(answer: &str) -> &str {
        answer.split("\r\n").next().unwrap_or("")
    }

    #[test]
    fn the_request_line_picks_the_answer() {
        use Parsed::*;
        assert_eq!(
            parse_request_line("GET /metrics HTTP/1.1"),
            Metrics { head_only: false }
        );
        assert_eq!(
            parse_request_line("GET /metrics?x=1 HTTP/1.0"),
            Metrics { head_only: false }
        );
        assert_eq!(
            parse_request_line("HEAD /metrics HTTP/1.1"),
            Metrics { head_only: true }
        );
        assert_eq!(parse_request_line("GET / HTTP/1.1"), NotFound);
        assert_eq!(
            parse_request_line("POST /metrics HTTP/1.1"),
            MethodNotAllowed
        );
        assert_eq!(parse_request_line("GET /metrics"), BadRequest);
        assert_eq!(parse_request_line("GET /metrics HTTP/1.1 x"), BadRequest);
        assert_eq!(parse_request_line("GET metrics HTTP/1.1"), BadRequest);
        assert_eq!(parse_request_line("\u{0}\u{1}"), BadRequest);
    }

    #[test]
    fn metrics_are_served_and_everything_else_refused() {
        let s = server(HttpLimits::default());
        let ok = exchange(s.local_addr(), b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(status(&ok), "HTTP/1.1 200 OK");
        assert!(ok.contains(CONTENT_TYPE), "{ok}");
        assert!(ok.ends_with("up 1\n# EOF\n"), "{ok}");
        let head = exchange(s.local_addr(), b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status(&head), "HTTP/1.1 200 OK");
        assert!(head.ends_with("\r\n\r\n"), "HEAD has no body: {head}");
        let missing = exchange(s.local_addr(), b"GET /other HTTP/1.1\r\n\r\n");
        assert_eq!(status(&missing), "HTTP/1.1 404 Not Found");
        let post = exchange(s.local_addr(), b"POST /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status(&post), "HTTP/1.1 405 Method Not Allowed");
        assert!(post.contains("Allow: GET, HEAD"), "{post}");
        let bad = exchange(s.local_addr(), b"garbage\r\n\r\n");
        assert_eq!(status(&bad), "HTTP/1.1 400 Bad Request");
    }

    #[test]
    fn a_request_head_over_the_limit_is_refused() {
        let s = server(HttpLimits {
            max_request_bytes: 256,
            ..HttpLimits::default()
        });
        let mut big = b"GET /metrics HTTP/1.1\r\nX-Padding: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', 4096));
        big.extend_from_slice(b"\r\n\r\n");
        let answer = exchange(s.local_addr(), &big);
        assert_eq!(
            status(&answer),
            "HTTP/1.1 431 Request Header Fields Too Large"
        );
        // Still serving.
        let ok = exchange(s.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status(&ok), "HTTP/1.1 200 OK");
    }

    #[test]
    fn a_silent_client_is_timed_out() {
        let s = server(HttpLimits {
            timeout: Duration::from_millis(200),
            ..HttpLimits::default()
        });
        let started = Instant::now();
        let answer = exchange(s.local_addr(), b"GET /metr");
        assert_eq!(status(&answer), "HTTP/1.1 408 Request Timeout");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn connections_beyond_the_limit_get_503_until_one_finishes() {
        let s = server(HttpLimits {
            max_connections: 2,
            timeout: Duration::from_secs(10),
            ..HttpLimits::default()
        });
        // Two connections that send half a request hold both slots.
        let held: Vec<TcpStream> = (0..2)
            .map(|_| {
                let mut c = TcpStream::connect(s.local_addr()).unwrap();
                c.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
                c
            })
            .collect();
        // The accept loop takes connections in order: the third is over the limit.
        let mut refused = None;
        for _ in 0..50 {
            let answer = exchange(s.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
            if status(&answer) == "HTTP/1.1 503 Service Unavailable" {
                refused = Some(answer);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(refused.is_some(), "no 503 while two connections were held");
        // Finishing one frees its slot.
        let mut first = held.into_iter().next().unwrap();
        first.write_all(b"\r\n").unwrap();
        let mut answer = String::new();
        first.read_to_string(&mut answer).unwrap();
        assert_eq!(status(&answer), "HTTP/1.1 200 OK");
        let mut served = false;
        for _ in 0..50 {
            let answer = exchange(s.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
            if status(&answer) == "HTTP/1.1 200 OK" {
                served = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(served, "a freed slot is served again");
    }
}
