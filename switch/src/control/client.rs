//! The client side of the control socket, used by `pfcswitch ctl` and by the tools.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::{ControlError, ReplyLine, Request, Response};
use crate::core::fdb::FdbRow;
use crate::core::slowpath::DeadlockReport;
use crate::core::traffic_map::TrafficMapView;
use crate::stats::Stats;

/// Sends one request and returns the switch's answer.
pub fn request(path: &Path, req: &Request) -> Result<Response, ControlError> {
    let shown = || path.display().to_string();
    let stream = UnixStream::connect(path).map_err(|source| ControlError::Connect { path: shown(), source })?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|source| ControlError::Io { path: shown(), source })?;
    let mut writer = stream.try_clone().map_err(|source| ControlError::Io { path: shown(), source })?;
    let line = serde_json::to_string(req).expect("requests serialize");
    writeln!(writer, "{line}").map_err(|source| ControlError::Io { path: shown(), source })?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).map_err(|source| ControlError::Io { path: shown(), source })?;
    match serde_json::from_str(&reply).map_err(|e| ControlError::BadReply(format!("{e}: {:?}", reply.trim())))? {
        ReplyLine::Ok(response) => Ok(response),
        ReplyLine::Error(e) => Err(ControlError::Refused(e)),
    }
}

/// Runs a capture: sends `req`, then copies the pcapng stream the switch writes into `out`
/// until the switch ends it (its count or time reached). Once `stop` is set (Ctrl-C), asks
/// the switch to end it and keeps copying what it still writes, its statistics last.
/// Returns the ports the capture was on.
pub fn capture(
    path: &Path,
    req: &super::CaptureRequest,
    out: &mut dyn Write,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Vec<String>, ControlError> {
    use std::io::Read;
    use std::sync::atomic::Ordering;
    let shown = || path.display().to_string();
    let io = |source| ControlError::Io { path: shown(), source };
    let stream = UnixStream::connect(path).map_err(|source| ControlError::Connect { path: shown(), source })?;
    stream.set_read_timeout(Some(Duration::from_millis(100))).map_err(io)?;
    let mut writer = stream.try_clone().map_err(io)?;
    let line = serde_json::to_string(&Request::CaptureStart(req.clone())).expect("requests serialize");
    writeln!(writer, "{line}").map_err(io)?;
    let mut reader = BufReader::new(stream);
    let mut reply = String::new();
    // The reply comes before any frame; give the dataplane its time to answer.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match reader.read_line(&mut reply) {
            Ok(_) if reply.ends_with('\n') => break,
            Ok(0) => return Err(ControlError::BadReply("the switch closed the connection".into())),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(io(e)),
        }
        if std::time::Instant::now() > deadline {
            return Err(ControlError::BadReply("no answer to the capture request in 10 s".into()));
        }
    }
    let ports =
        match serde_json::from_str(&reply).map_err(|e| ControlError::BadReply(format!("{e}: {:?}", reply.trim())))? {
            ReplyLine::Ok(Response::CaptureStarted(ports)) => ports.into_iter().map(|(_, name)| name).collect(),
            ReplyLine::Ok(other) => return Err(wrong(&Request::CaptureStart(req.clone()), &other)),
            ReplyLine::Error(e) => return Err(ControlError::Refused(e)),
        };
    let mut asked_to_stop = false;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        if stop.load(Ordering::Relaxed) && !asked_to_stop {
            // Any line ends the capture; the switch then writes its statistics and closes.
            let _ = writeln!(writer);
            asked_to_stop = true;
        }
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.write_all(&buf[..n]).map_err(io)?,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    out.flush().map_err(io)?;
    Ok(ports)
}

fn wrong(req: &Request, got: &Response) -> ControlError {
    let got = format!("{got:?}");
    ControlError::WrongReply { request: format!("{req:?}"), got: got.chars().take(80).collect() }
}

pub fn stats(path: &Path) -> Result<Stats, ControlError> {
    match request(path, &Request::Stats)? {
        Response::Stats(s) => Ok(*s),
        other => Err(wrong(&Request::Stats, &other)),
    }
}

pub fn fdb(path: &Path) -> Result<Vec<FdbRow>, ControlError> {
    match request(path, &Request::Fdb)? {
        Response::Fdb(rows) => Ok(rows),
        other => Err(wrong(&Request::Fdb, &other)),
    }
}

pub fn traffic_map(path: &Path) -> Result<TrafficMapView, ControlError> {
    match request(path, &Request::TrafficMap)? {
        Response::TrafficMap(m) => Ok(m),
        other => Err(wrong(&Request::TrafficMap, &other)),
    }
}

pub fn deadlocks(path: &Path) -> Result<DeadlockReport, ControlError> {
    match request(path, &Request::Deadlocks)? {
        Response::Deadlocks(d) => Ok(d),
        other => Err(wrong(&Request::Deadlocks, &other)),
    }
}

/// Sends a command (block, unblock, clear-watermarks) and returns what was done.
pub fn command(path: &Path, req: &Request) -> Result<String, ControlError> {
    match request(path, req)? {
        Response::Done(what) => Ok(what),
        other => Err(wrong(req, &other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_one_json_object_per_line() {
        assert_eq!(serde_json::to_string(&Request::Stats).unwrap(), r#"{"cmd":"stats"}"#);
        assert_eq!(serde_json::from_str::<Request>(r#"{"cmd":"clear-watermarks"}"#).unwrap(), Request::ClearWatermarks);
    }

    #[test]
    fn replies_say_ok_or_error_and_name_their_kind() {
        let line = serde_json::to_string(&ReplyLine::Ok(Response::Done("p2 blocked".into()))).unwrap();
        assert_eq!(line, r#"{"ok":{"done":"p2 blocked"}}"#);
        let back: ReplyLine = serde_json::from_str(r#"{"error":"no port \"x\""}"#).unwrap();
        assert!(matches!(back, ReplyLine::Error(e) if e == "no port \"x\""));
        let stats = Response::Stats(Box::default());
        let back: ReplyLine =
            serde_json::from_str(&serde_json::to_string(&ReplyLine::Ok(stats.clone())).unwrap()).unwrap();
        assert!(matches!(back, ReplyLine::Ok(r) if r == stats));
    }

    #[test]
    fn missing_switch_is_a_clear_error() {
        let err = request(Path::new("/nonexistent/pfcswitch-test.sock"), &Request::Stats).unwrap_err();
        assert!(err.to_string().contains("no switch is listening"), "{err}");
    }
}
