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
