//! A minimal pcap writer (what Wireshark and tcpdump read), for captured control frames.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};

pub struct PcapWriter {
    out: BufWriter<File>,
}

impl PcapWriter {
    pub fn create(path: impl AsRef<Path>) -> Result<PcapWriter> {
        let path = path.as_ref();
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = BufWriter::new(file);
        // Magic (µs timestamps), version 2.4, UTC offset, accuracy, snaplen, LINKTYPE_ETHERNET.
        for field in [0xa1b2_c3d4u32.to_le_bytes(), [2, 0, 4, 0]] {
            out.write_all(&field)?;
        }
        for v in [0u32, 0, 65535, 1] {
            out.write_all(&v.to_le_bytes())?;
        }
        Ok(PcapWriter { out })
    }

    /// Appends one frame, stamped with the wall clock. Write errors surface at `flush`.
    pub fn write(&mut self, frame: &[u8]) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let len = frame.len() as u32;
        let header = [now.as_secs() as u32, now.subsec_micros(), len, len];
        for v in header {
            let _ = self.out.write_all(&v.to_le_bytes());
        }
        let _ = self.out.write_all(frame);
    }

    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().context("writing the capture")
    }
}

/// Reads the frames of a pcap file written by [`PcapWriter`] (or any little-endian,
/// microsecond pcap).
pub fn read_frames(path: impl AsRef<Path>) -> Result<Vec<Vec<u8>>> {
    let data = std::fs::read(path.as_ref()).with_context(|| format!("reading {}", path.as_ref().display()))?;
    anyhow::ensure!(data.len() >= 24 && data[..4] == 0xa1b2_c3d4u32.to_le_bytes(), "not a little-endian pcap file");
    let mut frames = Vec::new();
    let mut at = 24;
    while at + 16 <= data.len() {
        let caplen = u32::from_le_bytes(data[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        at += 16;
        anyhow::ensure!(at + caplen <= data.len(), "truncated pcap record");
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
