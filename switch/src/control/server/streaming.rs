//! `ctl capture` over the socket: the capture started in the dataplane, its frames
//! streamed as pcapng, bounded in count and time, and stopped when the client speaks.

use super::*;

/// The most frames one capture may ask for, and the longest it may run: what a local
/// user can start is bounded.
pub(super) const MAX_CAPTURE_FRAMES: u64 = 100_000_000;
pub(super) const MAX_CAPTURE_TIME: Duration = Duration::from_secs(24 * 3600);
/// How long the capture's reader waits for a frame before it looks at the clock and the
/// client again.
pub(super) const CAPTURE_POLL: Duration = Duration::from_millis(20);

/// Serves `ctl capture`: starts the capture in the dataplane, answers with a reply line,
/// then writes the frames as a pcapng stream (an interface per port, each frame's
/// direction in its flags) until the asked count or time, a line from the client, or
/// the switch stopping; stops the capture and ends the stream with each interface's
/// statistics: frames the switch saw there during the capture, and frames the capture
/// skipped (its rate, or a reader that fell behind) as the drop count.
pub(super) fn stream_capture(
    stream: &mut UnixStream,
    c: &CaptureRequest,
    routes: &Routes,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    if let Err(why) = check_capture(c) {
        return write_reply(stream, Err(why));
    }
    let (ends, reader) = capture::queues();
    let (reply, answer) = crossbeam_channel::bounded(1);
    let msg = ControlMsg { request: Request::CaptureStart(c.clone()), reply, capture: Some(ends) };
    if routes.dataplane.send(msg).is_err() {
        return write_reply(stream, Err("the dataplane has stopped".into()));
    }
    routes.dataplane_waker.wake();
    let ports = match answer.recv_timeout(REPLY_TIMEOUT) {
        Ok(Ok(Response::CaptureStarted(ports))) => ports,
        Ok(Ok(other)) => return write_reply(stream, Err(format!("the dataplane answered {other:?}"))),
        Ok(Err(why)) => return write_reply(stream, Err(why)),
        Err(_) => return write_reply(stream, Err("the dataplane did not answer in time".into())),
    };
    let streamed = write_reply(stream, Ok(Response::CaptureStarted(ports.clone())))
        .and_then(|()| pump(stream, c, &ports, &reader, stop, routes));
    if streamed.is_err() {
        // The client went away: the capture still ends here.
        let _ = ask_switch(Request::CaptureStop, routes);
    }
    streamed
}

/// What a capture request may ask for.
pub(super) fn check_capture(c: &CaptureRequest) -> Result<(), String> {
    if c.ports.is_empty() || c.ports.len() > crate::core::MAX_PORTS {
        return Err(format!("a capture names 1 to {} ports", crate::core::MAX_PORTS));
    }
    if !c.rx && !c.tx {
        return Err("a capture records rx, tx or both".into());
    }
    if !(1..=capture::MAX_RATE).contains(&c.rate) {
        return Err(format!("a capture's rate is 1 to {} frames a second", capture::MAX_RATE));
    }
    if c.count.is_some_and(|n| n == 0 || n > MAX_CAPTURE_FRAMES) {
        return Err(format!("a capture's count is 1 to {MAX_CAPTURE_FRAMES}"));
    }
    if c.duration_ms.is_some_and(|ms| ms == 0 || Duration::from_millis(ms) > MAX_CAPTURE_TIME) {
        return Err(format!("a capture lasts up to {} s", MAX_CAPTURE_TIME.as_secs()));
    }
    Ok(())
}

/// Whether the client sent something (or closed): a capture's stop.
pub(super) fn client_spoke(stream: &UnixStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut fd = crate::sys::pollfd(stream.as_raw_fd());
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut fd, 1, 0) > 0 }
}

/// The capture's pcapng stream (see [`stream_capture`]).
pub(super) fn pump(
    stream: &mut UnixStream,
    c: &CaptureRequest,
    ports: &[(usize, String)],
    reader: &capture::ReaderEnds,
    stop: &AtomicBool,
    routes: &Routes,
) -> std::io::Result<()> {
    let broken = |e: pfcpcap::PcapError| std::io::Error::other(e.to_string());
    let mut w = CaptureWriter::new(std::io::BufWriter::new(&*stream)).map_err(broken)?;
    let mut iface = vec![u32::MAX; crate::core::MAX_PORTS];
    for (p, name) in ports {
        iface[*p] = w.interface(name).map_err(broken)?;
    }
    // The switch stamps frames with its monotonic clock; the file wants the wall clock.
    let (mono, wall) = (crate::sys::now().as_nanos(), SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default());
    let to_wall = |at: Time| (wall + Duration::from_nanos(at.as_nanos())).saturating_sub(Duration::from_nanos(mono));
    let deadline = c.duration_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
    let mut written = 0u64;
    let full = |written: u64| c.count.is_some_and(|n| written >= n);
    let write = |w: &mut CaptureWriter<_>, f: capture::CapturedFrame, written: &mut u64| {
        let data = &f.data[..(f.len as usize).min(capture::SNAP)];
        let way = match f.way {
            capture::Way::Rx => Direction::Inbound,
            capture::Way::Tx => Direction::Outbound,
        };
        let r = w.frame(iface[f.port], to_wall(f.at), data, f.len as usize, Some(way));
        *written += 1;
        let _ = reader.slots.send(f.data);
        r.map_err(broken)
    };
    while !full(written)
        && deadline.is_none_or(|d| Instant::now() < d)
        && !stop.load(Ordering::Relaxed)
        && !client_spoke(stream)
    {
        match reader.frames.recv_timeout(CAPTURE_POLL) {
            Ok(f) => write(&mut w, f, &mut written)?,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        }
    }
    let counts = match ask_switch(Request::CaptureStop, routes) {
        Ok(Response::CaptureCounts(counts)) => counts,
        _ => Vec::new(),
    };
    // What the dataplane queued before it stopped belongs to the capture too.
    while let Ok(f) = reader.frames.try_recv() {
        if full(written) {
            break;
        }
        write(&mut w, f, &mut written)?;
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    for (p, name) in ports {
        if let Some(k) = counts.iter().find(|k| &k.port == name) {
            w.stats(iface[*p], now, k.rx.seen + k.tx.seen, k.rx.skipped + k.tx.skipped).map_err(broken)?;
        }
    }
    w.flush().map_err(broken)
}
