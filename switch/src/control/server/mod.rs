//! The control socket's server thread.
//!
//! The socket is the switch's remote control (it can block ports), so only its owner
//! (and root) may use it, or members of a configured group: the file is created 0600
//! (0660 with a group), and every connection's peer credentials are checked as well.
//! Its directory is made or checked first (ours or root's, a real directory, writable by
//! nobody else unless sticky), and the socket is bound inside a private directory, given
//! its mode there and only then renamed into place: no one can swap the path between
//! bind and chmod.
//! No client can hold the switch up: each connection has its own thread, a request line
//! is capped, a connection that sends no full request in time is closed, one that stays
//! idle between requests is closed too (so idle clients cannot keep every slot), and
//! shutdown never waits for a client.

mod access;
mod streaming;

pub use access::SocketAccess;
use access::*;
use streaming::*;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::Sender;

use super::{CaptureRequest, Cleared, ControlError, ControlMsg, ReplyLine, Request, Response, StatsFromKernel, Views};
use crate::capture;
use crate::core::time::Time;
use crate::stats::Stats;
use crate::sys::Waker;
use pfcpcap::{CaptureWriter, Direction};

/// How long a request may wait for the dataplane.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request line; every real request is far shorter.
pub const MAX_REQUEST_BYTES: usize = 64 << 10;
/// How long a connection may take to send a complete request line.
const REQUEST_TIME: Duration = Duration::from_secs(5);
/// How often a connection's thread looks at the stop flag while it waits.
const POLL: Duration = Duration::from_millis(50);
/// How long a reply may take to be written to a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections served at once; more are told to come back later.
const MAX_CLIENTS: usize = 8;
/// How long a connection may sit without a request before it is closed: `ctl` sends its
/// request as soon as it connects, and one connection per request is the protocol.
const IDLE_TIME: Duration = Duration::from_secs(2);

/// The listening control socket; removes its path when dropped.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Listens at `path`, passing requests to the dataplane (through `routes.dataplane`,
    /// waking it) or to the slowpath thread. A socket left at `path` by a switch that
    /// is gone is replaced; anything else there is an error (never deleted).
    pub fn start(path: &Path, routes: Routes, access: SocketAccess) -> Result<ControlServer, ControlError> {
        let io = |source| ControlError::Io { path: path.display().to_string(), source };
        // A client can reach the socket only by a path that fits a sockaddr_un (std's
        // check, the kernel's limit): say so here, not as a failed connect later.
        if std::os::unix::net::SocketAddr::from_pathname(path).is_err() {
            return Err(ControlError::PathTooLong { path: path.display().to_string(), len: path.as_os_str().len() });
        }
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        ensure_socket_dir(dir)?;
        match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.file_type().is_socket() => {
                return Err(ControlError::NotASocket(path.display().to_string()));
            }
            Ok(_) => {
                if UnixStream::connect(path).is_ok() {
                    return Err(ControlError::InUse(path.display().to_string()));
                }
                // Left behind by a switch that did not shut down cleanly.
                std::fs::remove_file(path).map_err(io)?;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let listener = bind_with_mode(path, dir, &access)?;
        listener.set_nonblocking(true).map_err(io)?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || serve(listener, Arc::new(routes), access, thread_stop))
            .map_err(io)?;
        Ok(ControlServer { path: path.to_path_buf(), stop, thread: Some(thread) })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Where requests go.
#[derive(Debug)]
pub struct Routes {
    pub dataplane: Sender<ControlMsg>,
    /// Wakes the dataplane out of its sleep.
    pub dataplane_waker: Waker,
    pub slowpath: Sender<ControlMsg>,
    /// Completes the dataplane's stats with the kernel's counters (none in unit tests).
    pub kernel: Option<Arc<dyn StatsFromKernel>>,
    /// What the latest `ctl clear` kept, shared by every connection (and the metrics
    /// listener's clone of the routes, which never reads it).
    pub cleared: Arc<Mutex<Option<Cleared>>>,
}

impl Routes {
    /// The same routes for another listener (the metrics endpoint).
    pub fn try_clone(&self) -> Result<Routes, crate::sys::SysError> {
        Ok(Routes {
            dataplane: self.dataplane.clone(),
            dataplane_waker: self.dataplane_waker.try_clone()?,
            slowpath: self.slowpath.clone(),
            kernel: self.kernel.clone(),
            cleared: self.cleared.clone(),
        })
    }
}

fn serve(listener: UnixListener, routes: Arc<Routes>, access: SocketAccess, stop: Arc<AtomicBool>) {
    let clients = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => admit(stream, &routes, &access, &clients, &stop),
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                tracing::warn!("control socket accept: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Checks who connected and hands the connection to a thread of its own.
fn admit(
    mut stream: UnixStream,
    routes: &Arc<Routes>,
    access: &SocketAccess,
    clients: &Arc<AtomicUsize>,
    stop: &Arc<AtomicBool>,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    match peer_cred(&stream) {
        Ok(peer) if access.allows(&peer) => {}
        Ok(peer) => {
            tracing::warn!(uid = peer.uid, pid = peer.pid, "control socket: connection refused (not the owner)");
            let _ = write_reply(&mut stream, Err("permission denied".into()));
            return;
        }
        Err(e) => {
            tracing::warn!("control socket: no peer credentials: {e}");
            return;
        }
    }
    if clients.fetch_add(1, Ordering::Relaxed) >= MAX_CLIENTS {
        clients.fetch_sub(1, Ordering::Relaxed);
        let _ = write_reply(&mut stream, Err(format!("busy: {MAX_CLIENTS} clients connected; try again")));
        return;
    }
    let (routes, clients, stop) = (routes.clone(), clients.clone(), stop.clone());
    let spawned = std::thread::Builder::new().name("control-client".into()).spawn(move || {
        if let Err(e) = handle(stream, &routes, &stop) {
            tracing::debug!("control connection: {e}");
        }
        clients.fetch_sub(1, Ordering::Relaxed);
    });
    if let Err(e) = spawned {
        tracing::warn!("control socket: cannot start a client thread: {e}");
    }
}

/// Serves one connection: a reply per request line, until the client closes, stays
/// silent mid-request too long, sends an over-long line, or the switch stops.
fn handle(mut stream: UnixStream, routes: &Routes, stop: &AtomicBool) -> std::io::Result<()> {
    stream.set_read_timeout(Some(POLL))?;
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    let mut since = Instant::now();
    // Since the connection came or its last reply went.
    let mut idle_since = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        while let Some(line) = take_line(&mut pending) {
            if let Some(request) = decode_request(&line) {
                if let Ok(Request::CaptureStart(c)) = request {
                    // The connection carries the capture from here on, and ends with it.
                    return stream_capture(&mut stream, &c, routes, stop);
                }
                let reply = request.and_then(|r| ask(r, routes));
                write_reply(&mut stream, reply)?;
            }
            since = Instant::now();
            idle_since = since;
        }
        if pending.len() > MAX_REQUEST_BYTES {
            let too_long = format!("request longer than {MAX_REQUEST_BYTES} bytes");
            return write_reply(&mut stream, Err(too_long));
        }
        if !pending.is_empty() && since.elapsed() > REQUEST_TIME {
            return write_reply(&mut stream, Err("incomplete request: no end of line in time".into()));
        }
        if pending.is_empty() && idle_since.elapsed() > IDLE_TIME {
            let idle = format!("no request for {} s: closed (connect for each request)", IDLE_TIME.as_secs());
            return write_reply(&mut stream, Err(idle));
        }
        match stream.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                if pending.is_empty() {
                    since = Instant::now();
                }
                pending.extend_from_slice(&buf[..n]);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Takes the first complete line (through its newline) off what a connection sent. With
/// [`decode_request`], the protocol's framing as plain functions over bytes: the fuzz
/// checks drive them without a socket.
pub fn take_line(pending: &mut Vec<u8>) -> Option<Vec<u8>> {
    let end = pending.iter().position(|&b| b == b'\n')?;
    Some(pending.drain(..=end).collect())
}

/// The request a line holds: `None` for a blank line, an error that quotes it for
/// anything that is not one.
pub fn decode_request(line: &[u8]) -> Option<Result<Request, String>> {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(serde_json::from_str::<Request>(text).map_err(|e| format!("bad request {text:?}: {e}")))
}

fn write_reply(stream: &mut UnixStream, reply: super::Reply) -> std::io::Result<()> {
    let line = serde_json::to_string(&ReplyLine::from(reply))
        .unwrap_or_else(|e| format!(r#"{{"error":"unserializable reply: {e}"}}"#));
    writeln!(stream, "{line}")
}

/// Passes `request` to whoever answers it and waits (bounded) for the reply. The
/// control thread answers what only needs the other requests' answers: the views'
/// snapshot and `ctl clear`.
pub(super) fn ask(request: Request, routes: &Routes) -> super::Reply {
    match request {
        Request::Clear => {
            let stats = stats(routes)?;
            ask(Request::ClearWatermarks, routes)?;
            let at_unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
            *lock(&routes.cleared) = Some(Cleared { at_unix_ms, stats });
            Ok(Response::Done(
                "the views and the stage latencies start from zero now, and the watermarks from what is held now"
                    .into(),
            ))
        }
        Request::Views => {
            let stats = stats(routes)?;
            Ok(Response::Views(Box::new(Views { stats, cleared: lock(&routes.cleared).clone() })))
        }
        other => ask_switch(other, routes),
    }
}

/// The stats snapshot, the kernel's part filled in.
fn stats(routes: &Routes) -> Result<Stats, String> {
    match ask_switch(Request::Stats, routes)? {
        Response::Stats(s) => Ok(*s),
        other => Err(format!("the dataplane answered stats with {other:?}")),
    }
}

/// The lock, even if a thread panicked holding it (the value is replaced whole).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Passes `request` to the dataplane or the slowpath and waits (bounded) for the reply.
fn ask_switch(request: Request, routes: &Routes) -> super::Reply {
    let (reply, answer) = crossbeam_channel::bounded(1);
    if request.for_slowpath() {
        routes
            .slowpath
            .send(ControlMsg { request, reply, capture: None })
            .map_err(|_| "the slowpath has stopped".to_string())?;
    } else {
        routes
            .dataplane
            .send(ControlMsg { request, reply, capture: None })
            .map_err(|_| "the dataplane has stopped".to_string())?;
        routes.dataplane_waker.wake();
    }
    let mut reply =
        answer.recv_timeout(REPLY_TIMEOUT).map_err(|_| "the dataplane did not answer in time".to_string())?;
    if let (Ok(Response::Stats(stats)), Some(kernel)) = (&mut reply, &routes.kernel) {
        kernel.complete(stats);
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::Response;
    use std::io::{BufRead, BufReader};

    /// Routes to these channels, no kernel counters, nothing cleared.
    fn routes(dataplane: Sender<ControlMsg>, slowpath: Sender<ControlMsg>) -> Routes {
        Routes {
            dataplane,
            dataplane_waker: Waker::new().unwrap(),
            slowpath,
            kernel: None,
            cleared: Default::default(),
        }
    }

    /// Routes to a dataplane and a slowpath that never answer.
    fn silent_routes() -> Routes {
        let (dataplane, _) = crossbeam_channel::bounded(1);
        let (slowpath, _) = crossbeam_channel::bounded(1);
        routes(dataplane, slowpath)
    }

    /// A server at a fresh path whose dataplane answers every request with "done".
    fn server(dir: &Path) -> (ControlServer, PathBuf) {
        let path = dir.join("sw.sock");
        (server_at(&path), path)
    }

    /// A server at `path` whose dataplane answers every request with "done".
    fn server_at(path: &Path) -> ControlServer {
        let (dataplane, requests) = crossbeam_channel::bounded::<ControlMsg>(16);
        let (slowpath, _slow) = crossbeam_channel::bounded(16);
        std::thread::spawn(move || {
            for msg in requests {
                let _ = msg.reply.send(Ok(Response::Done("done".into())));
            }
        });
        let routes = routes(dataplane, slowpath);
        ControlServer::start(path, routes, SocketAccess::owner_only()).unwrap()
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pfcswitch-ctl-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        // Whatever the umask: a group-writable directory would be refused.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    fn request(path: &Path) -> String {
        let mut s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        writeln!(s, r#"{{"cmd":"stats"}}"#).unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        line
    }

    /// Stands for the kernel's counters: says which thread asked it.
    #[derive(Debug, Default)]
    struct FakeKernel {
        asked_on: std::sync::Mutex<Option<std::thread::ThreadId>>,
    }

    impl StatsFromKernel for FakeKernel {
        fn complete(&self, stats: &mut crate::stats::Stats) {
            *self.asked_on.lock().unwrap() = Some(std::thread::current().id());
            stats.stalls.cpu_wait_us = Some(4242);
        }
    }

    #[test]
    fn clear_keeps_a_snapshot_that_every_later_view_request_gets_and_clears_the_watermarks() {
        let (dataplane, requests) = crossbeam_channel::bounded::<ControlMsg>(4);
        let (slowpath, _slow) = crossbeam_channel::bounded(1);
        // A dataplane whose switch has taken one more frame at every look.
        let asked = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for (frames, msg) in (1u64..).zip(requests.iter()) {
                seen.push(msg.request.clone());
                let stats = Stats { free_frames: frames, ..Stats::default() };
                let answer = match msg.request {
                    Request::Stats => Response::Stats(Box::new(stats)),
                    _ => Response::Done("ok".into()),
                };
                let _ = msg.reply.send(Ok(answer));
            }
            seen
        });
        let routes = routes(dataplane, slowpath);
        let Ok(Response::Views(before)) = ask(Request::Views, &routes) else { panic!("no views") };
        assert_eq!((before.stats.free_frames, before.cleared), (1, None));
        assert!(matches!(ask(Request::Clear, &routes), Ok(Response::Done(_))));
        let Ok(Response::Views(after)) = ask(Request::Views, &routes.try_clone().unwrap()) else { panic!("no views") };
        assert_eq!(after.stats.free_frames, 4);
        assert_eq!(after.cleared.map(|c| c.stats.free_frames), Some(2), "the snapshot clear took");
        drop(routes);
        let seen = asked.join().unwrap();
        assert_eq!(seen, [Request::Stats, Request::Stats, Request::ClearWatermarks, Request::Stats]);
    }

    #[test]
    fn the_kernels_counters_are_read_by_the_asking_thread_not_the_dataplanes() {
        let (dataplane, requests) = crossbeam_channel::bounded::<ControlMsg>(1);
        let (slowpath, _slow) = crossbeam_channel::bounded(1);
        let forwarding = std::thread::spawn(move || {
            let msg = requests.recv().unwrap();
            let _ = msg.reply.send(Ok(Response::Stats(Box::default())));
            std::thread::current().id()
        });
        let kernel = Arc::new(FakeKernel::default());
        let routes = Routes { kernel: Some(kernel.clone()), ..routes(dataplane, slowpath) };
        let Ok(Response::Stats(stats)) = ask(Request::Stats, &routes) else { panic!("no stats") };
        let forwarding = forwarding.join().unwrap();
        assert_eq!(stats.stalls.cpu_wait_us, Some(4242), "completed before it was handed back");
        let asked_on = kernel.asked_on.lock().unwrap().unwrap();
        assert_eq!(asked_on, std::thread::current().id());
        assert_ne!(asked_on, forwarding);
        // Other answers pass as they are.
        let (dataplane, requests) = crossbeam_channel::bounded::<ControlMsg>(1);
        std::thread::spawn(move || requests.recv().map(|m| m.reply.send(Ok(Response::Done("ok".into())))));
        let routes = Routes { dataplane, ..routes };
        assert!(matches!(ask(Request::ClearWatermarks, &routes), Ok(Response::Done(_))));
    }

    #[test]
    fn the_socket_is_the_owners_alone() {
        let dir = temp_dir("mode");
        let (_server, path) = server(&dir);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(request(&path).contains("done"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn strangers_are_refused_and_group_members_let_in_only_with_a_group() {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let stranger = PeerCred { pid: i32::MAX, uid: me.wrapping_add(4242), gid: 4242 };
        assert!(!SocketAccess::owner_only().allows(&stranger));
        assert!(SocketAccess::owner_only().allows(&PeerCred { uid: me, ..stranger }));
        assert!(SocketAccess::owner_only().allows(&PeerCred { uid: 0, ..stranger }));
        let team = SocketAccess { group: Some(("team".into(), 4242)) };
        assert!(team.allows(&stranger), "its primary group is the socket's");
        assert!(!team.allows(&PeerCred { gid: 4243, ..stranger }));
        assert_eq!((team.mode(), SocketAccess::owner_only().mode()), (0o660, 0o600));
        assert!(matches!(SocketAccess::group("no-such-group-here"), Err(ControlError::NoGroup(_))));
    }

    #[test]
    fn a_file_that_is_not_a_socket_is_never_deleted() {
        let dir = temp_dir("file");
        let path = dir.join("sw.sock");
        std::fs::write(&path, "precious").unwrap();
        let err = ControlServer::start(&path, silent_routes(), SocketAccess::owner_only()).unwrap_err();
        assert!(matches!(err, ControlError::NotASocket(_)), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_socket_path_of_107_bytes_is_bound_and_answers_and_one_of_108_is_refused_by_its_length() {
        let dir = temp_dir("fits");
        let at = |len: usize| {
            let base = dir.join("s").display().to_string();
            PathBuf::from(format!("{base}{}.sock", "x".repeat(len - base.len() - ".sock".len())))
        };
        let path = at(107);
        assert_eq!(path.as_os_str().len(), 107);
        let server = server_at(&path);
        assert!(request(&path).contains("done"));
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        drop(server);
        let err = ControlServer::start(&at(108), silent_routes(), SocketAccess::owner_only()).unwrap_err();
        assert!(matches!(err, ControlError::PathTooLong { len: 108, .. }), "{err}");
        assert!(err.to_string().contains("at most 107"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_live_one_refused() {
        let dir = temp_dir("stale");
        let path = dir.join("sw.sock");
        drop(UnixListener::bind(&path).unwrap());
        let server1 = ControlServer::start(&path, silent_routes(), SocketAccess::owner_only()).unwrap();
        let err = ControlServer::start(&path, silent_routes(), SocketAccess::owner_only()).unwrap_err();
        assert!(matches!(err, ControlError::InUse(_)), "{err}");
        drop(server1);
        assert!(!path.exists(), "removed on shutdown");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_over_long_line_is_refused_and_the_connection_closed() {
        let dir = temp_dir("long");
        let (_server, path) = server(&dir);
        let mut s = UnixStream::connect(&path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let junk = vec![b'x'; MAX_REQUEST_BYTES + 8192];
        // The server may close before taking all of it.
        let _ = s.write_all(&junk);
        let mut reply = String::new();
        let _ = BufReader::new(&s).read_line(&mut reply);
        assert!(reply.contains("request longer than"), "{reply}");
        assert!(request(&path).contains("done"), "the switch still answers others");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_silent_client_neither_blocks_others_nor_holds_up_shutdown() {
        let dir = temp_dir("slow");
        let (server, path) = server(&dir);
        let mut silent = UnixStream::connect(&path).unwrap();
        silent.write_all(b"{\"cmd\":").unwrap();
        let t = Instant::now();
        assert!(request(&path).contains("done"));
        assert!(t.elapsed() < REQUEST_TIME, "answered while the other client is mid-request");
        let t = Instant::now();
        drop(server);
        assert!(t.elapsed() < Duration::from_secs(1), "shutdown took {:?}", t.elapsed());
        drop(silent);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn idle_clients_are_closed_so_they_cannot_keep_every_slot() {
        let dir = temp_dir("idle");
        let (_server, path) = server(&dir);
        let idle: Vec<UnixStream> = (0..MAX_CLIENTS).map(|_| UnixStream::connect(&path).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(200));
        assert!(request(&path).contains("busy"), "every slot taken for now");
        std::thread::sleep(IDLE_TIME + Duration::from_millis(500));
        assert!(request(&path).contains("done"), "the idle ones were closed");
        let mut first = BufReader::new(&idle[0]);
        let mut said = String::new();
        first.read_line(&mut said).unwrap();
        assert!(said.contains("no request for 2 s"), "{said}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_others_could_write_or_a_symlink_is_refused_and_a_sticky_one_taken() {
        let dir = temp_dir("dirs");
        let open = dir.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = ControlServer::start(&open.join("sw.sock"), silent_routes(), SocketAccess::owner_only()).unwrap_err();
        assert!(
            matches!(err, ControlError::UnsafeDir { .. }) && err.to_string().contains("writable by others"),
            "{err}"
        );
        assert!(!open.join("sw.sock").exists());
        let link = dir.join("link");
        std::os::unix::fs::symlink(&open, &link).unwrap();
        let err = ControlServer::start(&link.join("sw.sock"), silent_routes(), SocketAccess::owner_only()).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let server = ControlServer::start(&open.join("sw.sock"), silent_routes(), SocketAccess::owner_only()).unwrap();
        let left: Vec<String> =
            std::fs::read_dir(&open).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(left, ["sw.sock"], "the socket in place, its private directory gone");
        let mode = std::fs::metadata(open.join("sw.sock")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        drop(server);
        let made = dir.join("new/deeper");
        let server = ControlServer::start(&made.join("sw.sock"), silent_routes(), SocketAccess::owner_only()).unwrap();
        let mode = std::fs::metadata(&made).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode & 0o022, 0, "made without write for others: {mode:o}");
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
