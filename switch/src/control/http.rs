//! The metrics endpoint's HTTP: GET requests, one per connection, and every resource a
//! client can make the switch spend is bounded: the request head's size, the time to send
//! it and to read the answer, and how many connections are served at once. Anything over
//! a bound is refused with its status code and counted by reason.
//!
//! Why our own and not a crate: tiny_http, which served `/metrics` before, reads a header
//! line of any length into memory and keeps a thread per connection with no limit and no
//! deadline (one client sending 1.5 GiB of header grew the switch from 115 MB to 1.41 GB;
//! 240 half-open connections stopped the scrapes). The crates that do offer such limits
//! (hyper and the servers built on it) bring an async runtime to answer one GET; what the
//! endpoint needs is a request line, a status and a body, which fits here with its
//! limits in plain sight.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the endpoint lets one client, and all of them, take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The request line and headers together.
    pub head_bytes: usize,
    /// Connections served at once; more are answered 503 and closed.
    pub connections: usize,
    /// Time to send the whole request head.
    pub read_time: Duration,
    /// Time for the client to take the answer.
    pub write_time: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        // A Prometheus scrape's head is a few hundred bytes, and one collector (or a few)
        // holds a connection at a time.
        Limits {
            head_bytes: 8 << 10,
            connections: 8,
            read_time: Duration::from_secs(5),
            write_time: Duration::from_secs(5),
        }
    }
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Every connection slot was taken.
    Busy,
    /// The head did not end within [`Limits::head_bytes`].
    HeadTooLarge,
    /// The head did not arrive within [`Limits::read_time`], or the client left first.
    Timeout,
    /// Not an HTTP/1 request line.
    Malformed,
}

impl Refusal {
    pub const ALL: [Refusal; 4] = [Refusal::Busy, Refusal::HeadTooLarge, Refusal::Timeout, Refusal::Malformed];

    pub fn name(self) -> &'static str {
        match self {
            Refusal::Busy => "busy",
            Refusal::HeadTooLarge => "head_too_large",
            Refusal::Timeout => "timeout",
            Refusal::Malformed => "malformed",
        }
    }

    fn status(self) -> (u16, &'static str) {
        match self {
            Refusal::Busy => (503, "Service Unavailable"),
            Refusal::HeadTooLarge => (431, "Request Header Fields Too Large"),
            Refusal::Timeout => (408, "Request Timeout"),
            Refusal::Malformed => (400, "Bad Request"),
        }
    }
}

/// Requests refused so far, by reason.
#[derive(Debug, Default)]
pub struct Refusals([AtomicU64; 4]);

impl Refusals {
    fn count(&self, r: Refusal) {
        self.0[r as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self, r: Refusal) -> u64 {
        self.0[r as usize].load(Ordering::Relaxed)
    }
}

/// A request head as far as the endpoint cares: its method and path (no query).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head<'a> {
    pub method: &'a str,
    pub path: &'a str,
}

/// Where the head ends (just past its blank line), if it has.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Reads the request line of a complete head. A plain function over bytes, so that the
/// fuzz checks and tests drive it without a socket.
pub fn parse_head(head: &[u8]) -> Result<Head<'_>, Refusal> {
    let line_end = head.windows(2).position(|w| w == b"\r\n").ok_or(Refusal::Malformed)?;
    let line = std::str::from_utf8(&head[..line_end]).map_err(|_| Refusal::Malformed)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::Malformed);
    };
    let token = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphabetic());
    if !token(method) || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return Err(Refusal::Malformed);
    }
    Ok(Head { method, path: target.split('?').next().unwrap_or(target) })
}

/// An answer: status, content type and body.
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

type Handler = dyn Fn(&Head) -> Answer + Send + Sync;

/// The listener; stops when dropped, at once, whatever its clients do.
pub struct HttpServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    refusals: Arc<Refusals>,
    /// The connections being served, to be shut down at stop.
    live: Arc<Mutex<Vec<(u64, TcpStream)>>>,
    thread: Option<JoinHandle<()>>,
}

/// How often the listener looks at its stop flag.
const POLL: Duration = Duration::from_millis(100);

impl HttpServer {
    pub fn start(
        addr: SocketAddr,
        limits: Limits,
        handler: impl Fn(&Head) -> Answer + Send + Sync + 'static,
    ) -> std::io::Result<HttpServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let refusals = Arc::new(Refusals::default());
        let live = Arc::new(Mutex::new(Vec::new()));
        let (s, r, l) = (stop.clone(), refusals.clone(), live.clone());
        let handler: Arc<Handler> = Arc::new(handler);
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || accept_loop(listener, limits, handler, s, r, l))?;
        Ok(HttpServer { addr, stop, refusals, live, thread: Some(thread) })
    }

    /// Where it listens (the port the kernel chose, if given port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn refusals(&self) -> Arc<Refusals> {
        self.refusals.clone()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // A client that never reads must not hold the switch's exit: its connection is
        // shut down under it, and its thread, no longer joined, ends on the error.
        for (_, s) in self.live.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    limits: Limits,
    handler: Arc<Handler>,
    stop: Arc<AtomicBool>,
    refusals: Arc<Refusals>,
    live: Arc<Mutex<Vec<(u64, TcpStream)>>>,
) {
    let mut next_id = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: poll on one valid pollfd we own.
        if unsafe { libc::poll(&mut pfd, 1, POLL.as_millis() as i32) } <= 0 {
            continue;
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::debug!("metrics listener: {e}");
                continue;
            }
        };
        let _ = stream.set_write_timeout(Some(limits.write_time));
        let mut slots = live.lock().unwrap_or_else(|e| e.into_inner());
        if slots.len() >= limits.connections {
            drop(slots);
            refusals.count(Refusal::Busy);
            // Said briefly: the write and the close are bounded by short deadlines.
            let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
            refuse(&stream, Refusal::Busy);
            close_gently(&stream, Duration::from_millis(50));
            continue;
        }
        let Ok(kept) = stream.try_clone() else { continue };
        next_id += 1;
        let id = next_id;
        slots.push((id, kept));
        drop(slots);
        let (handler, counts, slots) = (handler.clone(), refusals.clone(), live.clone());
        let spawned = std::thread::Builder::new().name("metrics-client".into()).spawn(move || {
            serve(stream, &limits, &*handler, &counts);
            slots.lock().unwrap_or_else(|e| e.into_inner()).retain(|(i, _)| *i != id);
        });
        if spawned.is_err() {
            live.lock().unwrap_or_else(|e| e.into_inner()).retain(|(i, _)| *i != id);
        }
    }
}

/// Reads one request head (within the limits), answers it, closes.
fn serve(mut stream: TcpStream, limits: &Limits, handler: &Handler, refusals: &Refusals) {
    let mut buf = vec![0u8; limits.head_bytes];
    let (mut n, deadline) = (0, Instant::now() + limits.read_time);
    let end = loop {
        if let Some(end) = head_end(&buf[..n]) {
            break Ok(end);
        }
        if n == buf.len() {
            break Err(Refusal::HeadTooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break Err(Refusal::Timeout);
        }
        match stream.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break Err(Refusal::Timeout),
            Ok(k) => n += k,
        }
    };
    let answer = end.and_then(|end| parse_head(&buf[..end]).map(|head| handler(&head)));
    match answer {
        Ok(a) => {
            let (code, reason) = match a.status {
                200 => (200, "OK"),
                404 => (404, "Not Found"),
                503 => (503, "Service Unavailable"),
                _ => (500, "Internal Server Error"),
            };
            let _ = write_answer(&stream, code, reason, a.content_type, &a.body);
        }
        Err(r) => {
            refusals.count(r);
            refuse(&stream, r);
            close_gently(&stream, Duration::from_millis(200));
            return;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// Closes after a refusal without losing the answer: a socket closed with unread input
/// sends a reset, which makes the client's kernel drop the answer before it is read (a
/// refused request may still be arriving). So the write side is closed first and what
/// comes in is read and discarded, up to `linger` and 64 KiB.
fn close_gently(mut stream: &TcpStream, linger: Duration) {
    let _ = stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + linger;
    let mut sink = [0u8; 4096];
    let mut left = 64usize << 10;
    while left > 0 {
        let wait = deadline.saturating_duration_since(Instant::now());
        if wait.is_zero() || stream.set_read_timeout(Some(wait)).is_err() {
            break;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

fn refuse(stream: &TcpStream, r: Refusal) {
    let (code, reason) = r.status();
    let _ = write_answer(stream, code, reason, "text/plain; charset=utf-8", &format!("{}\n", r.name()));
}

fn write_answer(
    mut stream: &TcpStream,
    code: u16,
    reason: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(limits: Limits) -> HttpServer {
        HttpServer::start("127.0.0.1:0".parse().unwrap(), limits, |head: &Head| Answer {
            status: if head.path == "/metrics" { 200 } else { 404 },
            content_type: "text/plain",
            body: format!("{} {}\n", head.method, head.path),
        })
        .unwrap()
    }

    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(request);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn request_lines_are_read_strictly() {
        assert_eq!(parse_head(b"GET /metrics?x=1 HTTP/1.1\r\n\r\n"), Ok(Head { method: "GET", path: "/metrics" }));
        for bad in
            [&b"GET /metrics\r\n\r\n"[..], b"GET  /metrics HTTP/1.1\r\n", b"GET metrics HTTP/1.1\r\n", b"\xff\r\n"]
        {
            assert_eq!(parse_head(bad), Err(Refusal::Malformed), "{bad:?}");
        }
        assert_eq!(parse_head(b"GET / HTTP/2\r\n\r\n"), Err(Refusal::Malformed));
    }

    #[test]
    fn a_scrape_is_answered_and_closed() {
        let srv = server(Limits::default());
        let out = exchange(srv.addr(), b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n") && out.ends_with("GET /metrics\n"), "{out}");
        assert!(out.contains("Content-Length: 13\r\n") && out.contains("Connection: close\r\n"), "{out}");
        assert!(exchange(srv.addr(), b"GET /other HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    }

    #[test]
    fn a_huge_header_is_refused_after_the_limit_without_reading_the_rest() {
        let srv = server(Limits::default());
        let mut s = TcpStream::connect(srv.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nX-Long: ").unwrap();
        // Keep sending past the limit: the answer comes once 8 KiB are in, not at the end.
        let chunk = vec![b'a'; 4096];
        for _ in 0..4 {
            if s.write_all(&chunk).is_err() {
                break;
            }
        }
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
        assert_eq!(srv.refusals().get(Refusal::HeadTooLarge), 1);
    }

    #[test]
    fn idle_connections_take_only_their_slots_and_time_out_and_scrapes_go_on() {
        let limits = Limits { connections: 2, read_time: Duration::from_millis(500), ..Limits::default() };
        let srv = server(limits);
        let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(srv.addr()).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(200));
        let out = exchange(srv.addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 503 "), "both slots held: {out}");
        // The idle ones are dropped at their deadline, and the slots come back.
        std::thread::sleep(Duration::from_millis(800));
        let out = exchange(srv.addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
        assert_eq!((srv.refusals().get(Refusal::Busy), srv.refusals().get(Refusal::Timeout)), (1, 2));
        drop(idle);
    }

    #[test]
    fn stopping_does_not_wait_for_a_client_that_never_reads_or_sends() {
        let srv = server(Limits::default());
        let _silent = TcpStream::connect(srv.addr()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        drop(srv);
        assert!(started.elapsed() < Duration::from_secs(1), "stopped in {:?}", started.elapsed());
    }
}
