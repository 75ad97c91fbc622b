//! A minimal pcap writer (what Wireshark and tcpdump read), for captured control frames
//! and the simulator's links.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// What reading or writing a capture can fail with.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error("{what} {path}: {source}")]
    File { what: &'static str, path: String, source: std::io::Error },
    #[error("writing the capture: {0}")]
    Write(#[from] std::io::Error),
    #[error("not a little-endian pcap file")]
    NotPcap,
    #[error("truncated pcap record")]
    Truncated,
}

type Result<T> = std::result::Result<T, PcapError>;

/// A pcap file being written: the classic format, little-endian, Ethernet frames.
pub struct PcapWriter {
    out: BufWriter<File>,
    nanos: bool,
}

/// The file magic for microsecond and for nanosecond timestamps.
const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;

impl PcapWriter {
    /// A capture with microsecond timestamps from the wall clock ([`PcapWriter::write`]).
    pub fn create(path: impl AsRef<Path>) -> Result<PcapWriter> {
        PcapWriter::open(path.as_ref(), false)
    }

    /// A capture with nanosecond timestamps given by the caller ([`PcapWriter::write_at`]).
    pub fn create_nanos(path: impl AsRef<Path>) -> Result<PcapWriter> {
        PcapWriter::open(path.as_ref(), true)
    }

    fn open(path: &Path, nanos: bool) -> Result<PcapWriter> {
        let file = File::create(path).map_err(|source| PcapError::File {
            what: "creating",
            path: path.display().to_string(),
            source,
        })?;
        let mut out = BufWriter::new(file);
        // Magic, version 2.4, UTC offset, accuracy, snaplen, LINKTYPE_ETHERNET.
        let magic = if nanos { MAGIC_NS } else { MAGIC_US };
        for field in [magic.to_le_bytes(), [2, 0, 4, 0]] {
            out.write_all(&field)?;
        }
        for v in [0u32, 0, 65535, 1] {
            out.write_all(&v.to_le_bytes())?;
        }
        Ok(PcapWriter { out, nanos })
    }

    /// Appends one frame, stamped with the wall clock. Write errors surface at `flush`.
    pub fn write(&mut self, frame: &[u8]) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        self.write_at(now, frame);
    }

    /// Appends one frame stamped `at` (since the epoch of the capture's clock).
    pub fn write_at(&mut self, at: std::time::Duration, frame: &[u8]) {
        let len = frame.len() as u32;
        let fraction = if self.nanos { at.subsec_nanos() } else { at.subsec_micros() };
        let header = [at.as_secs() as u32, fraction, len, len];
        for v in header {
            let _ = self.out.write_all(&v.to_le_bytes());
        }
        let _ = self.out.write_all(frame);
    }

    /// Writes out what is buffered; the first write error since the last flush shows here.
    pub fn flush(&mut self) -> Result<()> {
        Ok(self.out.flush()?)
    }
}

/// Reads the frames of a pcap file written by [`PcapWriter`] (or any little-endian,
/// microsecond or nanosecond pcap).
pub fn read_frames(path: impl AsRef<Path>) -> Result<Vec<Vec<u8>>> {
    let path = path.as_ref();
    let data = std::fs::read(path).map_err(|source| PcapError::File {
        what: "reading",
        path: path.display().to_string(),
        source,
    })?;
    let magic = data.get(..4).map(|m| u32::from_le_bytes(m.try_into().expect("4 bytes")));
    if data.len() < 24 || !(magic == Some(MAGIC_US) || magic == Some(MAGIC_NS)) {
        return Err(PcapError::NotPcap);
    }
    let mut frames = Vec::new();
    let mut at = 24;
    while at + 16 <= data.len() {
        let caplen = u32::from_le_bytes(data[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        at += 16;
        if at + caplen > data.len() {
            return Err(PcapError::Truncated);
        }
        frames.push(data[at..at + caplen].to_vec());
        at += caplen;
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_what_it_reads() {
        let path = std::env::temp_dir().join(format!("pfctools-pcap-{}.pcap", std::process::id()));
        let mut w = PcapWriter::create(&path).unwrap();
        w.write(&[1, 2, 3]);
        w.write(&[0u8; 60]);
        w.flush().unwrap();
        drop(w);
        let frames = read_frames(&path).unwrap();
        assert_eq!(frames, vec![vec![1, 2, 3], vec![0u8; 60]]);
        let _ = std::fs::remove_file(path);
    }
}
