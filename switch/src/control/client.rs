//! The client side of the control socket, used by `pfcswitch ctl` and by the tools.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::{ControlError, Request};

/// Sends one request and returns the switch's result document.
pub fn request(path: &Path, req: &Request) -> Result<serde_json::Value, ControlError> {
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
    let doc: serde_json::Value = serde_json::from_str(&reply).map_err(|e| ControlError::BadReply(e.to_string()))?;
    if doc["ok"].as_bool() == Some(true) {
        Ok(doc["result"].clone())
    } else {
        Err(ControlError::Refused(doc["error"].as_str().unwrap_or("unknown error").to_string()))
    }
}

/// Sends a request and decodes the result as `T`.
pub fn request_as<T: serde::de::DeserializeOwned>(path: &Path, req: &Request) -> Result<T, ControlError> {
    serde_json::from_value(request(path, req)?).map_err(|e| ControlError::BadReply(e.to_string()))
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
    fn missing_switch_is_a_clear_error() {
        let err = request(Path::new("/nonexistent/pfcswitch-test.sock"), &Request::Stats).unwrap_err();
        assert!(err.to_string().contains("no switch is listening"), "{err}");
    }
}
