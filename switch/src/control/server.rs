//! The control socket's server thread.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;

use super::{ControlError, ControlMsg, ReplyLine, Request};
use crate::dataplane::sys::Waker;

/// How long a request may wait for the dataplane.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// The listening control socket; removes its path when dropped.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Listens at `path`, passing requests to the dataplane (through `routes.dataplane`,
    /// waking it) or to the slowpath thread.
    pub fn start(path: &Path, routes: Routes) -> Result<ControlServer, ControlError> {
        let io = |source| ControlError::Io { path: path.display().to_string(), source };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(ControlError::InUse(path.display().to_string()));
            }
            // Left behind by a switch that did not shut down cleanly.
            std::fs::remove_file(path).map_err(io)?;
        }
        let listener = UnixListener::bind(path).map_err(io)?;
        listener.set_nonblocking(true).map_err(io)?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || serve(listener, routes, thread_stop))
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
}

fn serve(listener: UnixListener, routes: Routes, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = handle(stream, &routes) {
                    tracing::debug!("control connection: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                tracing::warn!("control socket accept: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn handle(stream: UnixStream, routes: &Routes) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while reader.read_line(&mut line)? > 0 {
        let reply = match serde_json::from_str::<Request>(line.trim()) {
            Ok(request) => ask(request, routes),
            Err(e) => Err(format!("bad request {:?}: {e}", line.trim())),
        };
        let line_out = serde_json::to_string(&ReplyLine::from(reply))
            .unwrap_or_else(|e| format!(r#"{{"error":"unserializable reply: {e}"}}"#));
        writeln!(writer, "{line_out}")?;
        line.clear();
    }
    Ok(())
}

fn ask(request: Request, routes: &Routes) -> super::Reply {
    let (reply, answer) = crossbeam_channel::bounded(1);
    if request.for_slowpath() {
        routes.slowpath.send(ControlMsg { request, reply }).map_err(|_| "the slowpath has stopped".to_string())?;
    } else {
        routes.dataplane.send(ControlMsg { request, reply }).map_err(|_| "the dataplane has stopped".to_string())?;
        routes.dataplane_waker.wake();
    }
    answer.recv_timeout(REPLY_TIMEOUT).map_err(|_| "the dataplane did not answer in time".to_string())?
}
