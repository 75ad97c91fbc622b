//! Sends arbitrary raw frames (given in hex) from an interface: runts, unknown EtherTypes,
//! oversize frames, hand-made control frames.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use pfcswitch::core::switch::FramePool;

use super::xdp_port::HostPort;

/// Decodes hex, ignoring ':', '-' and whitespace.
pub fn parse_hex(s: &str) -> Result<Vec<u8>> {
    let digits: String = s.chars().filter(|c| !matches!(c, ':' | '-' | ' ' | '\n' | '\t')).collect();
    if !digits.len().is_multiple_of(2) {
        bail!("odd number of hex digits in {s:?}");
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).with_context(|| format!("bad hex {:?}", &digits[i..i + 2])))
        .collect()
}

/// Sends `frame` `count` times, `gap` apart. Returns how many the kernel accepted.
pub fn send(iface: &str, frame: &[u8], count: u64, gap: Duration) -> Result<u64> {
    if frame.is_empty() {
        bail!("an empty frame cannot be sent");
    }
    let mut host = HostPort::open(iface, false, 4096, false, None)?;
    if frame.len() > host.pool.bytes_capacity() {
        bail!("a {}-byte frame does not fit a UMEM frame of this interface", frame.len());
    }
    let mut sent = 0;
    while sent < count {
        host.port.reclaim(&mut host.pool, pfcswitch::sys::now());
        let Some(id) = host.pool.alloc() else {
            std::thread::sleep(Duration::from_micros(50));
            continue;
        };
        host.pool.write(id, frame.len()).copy_from_slice(frame);
        if host.port.tx_room(1) == 0 || !host.port.send(&mut host.pool, pfcswitch::sys::now(), std::iter::once(id)) {
            std::thread::sleep(Duration::from_micros(50));
            continue;
        }
        let _ = host.port.kick();
        sent += 1;
        if !gap.is_zero() {
            std::thread::sleep(gap);
        }
    }
    host.flush(Duration::from_secs(1));
    Ok(sent)
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_with_separators() {
        assert_eq!(super::parse_hex("01:80:c2 00-00-01").unwrap(), vec![1, 0x80, 0xc2, 0, 0, 1]);
        assert!(super::parse_hex("abc").is_err());
        assert!(super::parse_hex("zz").is_err());
    }
}
