//! System calls, clocks and links (the AF_XDP library's, [`afxdp::sys`], re-exported so
//! that paths read `pfcswitch::sys`), and the binaries' logging.

pub use afxdp::sys::*;

/// A log filter that does not parse, with where it came from.
#[derive(Debug, thiserror::Error)]
#[error("the log filter {spec:?} (from {from}) does not parse: {source}")]
pub struct LogFilterError {
    spec: String,
    from: &'static str,
    #[source]
    source: tracing_subscriber::filter::ParseError,
}

/// Logs to standard error, filtered by `directives` (`RUST_LOG`'s form, as `--log` takes
/// it: `info`, `warn,pfcswitch=debug`, a level alone or per target), or by `RUST_LOG`
/// when they are `None`, or else by `default`. A filter that does not parse is an error
/// that quotes it, not a filter that silently lets everything or nothing through.
///
/// `Targets`, not `EnvFilter`: the filters these programs are given name targets and
/// levels, which `Targets` parses; `EnvFilter` also matches span fields by regular
/// expression, which brought the regex crates into the build (a twentieth of the
/// binaries' compile time) for a form nobody here uses.
pub fn init_logging(directives: Option<&str>, default: &str) -> Result<(), LogFilterError> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let from_env = std::env::var("RUST_LOG").ok();
    let (spec, from) = match (directives, from_env.as_deref()) {
        (Some(d), _) => (d, "--log"),
        (None, Some(e)) => (e, "RUST_LOG"),
        (None, None) => (default, "the default"),
    };
    let filter: tracing_subscriber::filter::Targets =
        spec.parse().map_err(|source| LogFilterError { spec: spec.to_string(), from, source })?;
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(filter)
        .init();
    Ok(())
}

/// Makes a closed standard output end the program quietly (see the function's home,
/// the crate of what the binaries print).
pub use pfcswitch_table::quiet_on_closed_stdout;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_filter_that_does_not_parse_is_refused_before_anything_is_installed() {
        let err = init_logging(Some("pfcswitch=loud"), "info").unwrap_err();
        assert!(err.to_string().contains("\"pfcswitch=loud\" (from --log)"), "{err}");
        assert!(init_logging(Some("warn,pfcswitch=debug=x"), "info").is_err());
    }
}
