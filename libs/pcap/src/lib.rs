//! Captures in pcapng (what Wireshark, tshark and tcpdump read), written with the
//! `pcap-file` crate: one interface block per port or link, each frame with its direction,
//! and a statistics block per interface with what was received and what was skipped.
//! `pfcswitch ctl capture`, the simulator's links and the traffic tools' captures of MAC
//! control frames all write through [`CaptureWriter`].

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::blocks::interface_statistics::{InterfaceStatisticsBlock, InterfaceStatisticsOption};
use pcap_file::pcapng::{Block, PcapNgReader, PcapNgWriter};
use pcap_file::DataLink;

/// What reading or writing a capture can fail with.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error("{what} {path}: {source}")]
    File { what: &'static str, path: String, source: std::io::Error },
    #[error("writing the capture: {0}")]
    Write(#[from] pcap_file::PcapError),
    #[error("writing the capture: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}: neither a pcapng nor a pcap file ({1})")]
    NotACapture(String, String),
}

type Result<T> = std::result::Result<T, PcapError>;

/// Which way a frame went, as the pcapng packet flags say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Received on the interface.
    Inbound,
    /// Sent out of it.
    Outbound,
}

impl Direction {
    /// The `epb_flags` bits for the direction (bits 0-1: 01 inbound, 10 outbound).
    fn flags(self) -> u32 {
        match self {
            Direction::Inbound => 1,
            Direction::Outbound => 2,
        }
    }
}

/// A pcapng capture being written: Ethernet frames with nanosecond time stamps.
pub struct CaptureWriter<W: Write> {
    out: PcapNgWriter<W>,
    interfaces: u32,
    /// The first error of [`CaptureWriter::received_now`], for `flush` to report.
    failed: Option<PcapError>,
}

impl CaptureWriter<BufWriter<File>> {
    /// A capture in a new file at `path`.
    pub fn create(path: impl AsRef<Path>) -> Result<CaptureWriter<BufWriter<File>>> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|source| PcapError::File {
            what: "creating",
            path: path.display().to_string(),
            source,
        })?;
        CaptureWriter::new(BufWriter::new(file))
    }

    /// A capture in a new file at `path` with one interface, `name`: what the traffic
    /// tools write.
    pub fn create_one(path: impl AsRef<Path>, name: &str) -> Result<CaptureWriter<BufWriter<File>>> {
        let mut w = CaptureWriter::create(path)?;
        w.interface(name)?;
        Ok(w)
    }
}

impl<W: Write> CaptureWriter<W> {
    /// A capture into `out` (a file, stdout).
    pub fn new(out: W) -> Result<CaptureWriter<W>> {
        Ok(CaptureWriter { out: PcapNgWriter::new(out)?, interfaces: 0, failed: None })
    }

    /// Adds an interface named `name`; returns its number for [`CaptureWriter::frame`].
    pub fn interface(&mut self, name: &str) -> Result<u32> {
        let idb = InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: 0,
            options: vec![
                InterfaceDescriptionOption::IfName(Cow::Owned(name.to_string())),
                // pcap-file writes packet time stamps in nanoseconds.
                InterfaceDescriptionOption::IfTsResol(9),
            ],
        };
        self.out.write_pcapng_block(idb)?;
        self.interfaces += 1;
        Ok(self.interfaces - 1)
    }

    /// A frame on interface `iface` at `at` (since the Unix epoch, or the simulation's
    /// start): `data` as captured, of a frame `original_len` bytes long, going `direction`.
    pub fn frame(
        &mut self,
        iface: u32,
        at: Duration,
        data: &[u8],
        original_len: usize,
        direction: Option<Direction>,
    ) -> Result<()> {
        let epb = EnhancedPacketBlock {
            interface_id: iface,
            timestamp: at,
            original_len: original_len.max(data.len()) as u32,
            data: Cow::Borrowed(data),
            options: direction.map(|d| EnhancedPacketOption::Flags(d.flags())).into_iter().collect(),
        };
        self.out.write_pcapng_block(epb)?;
        Ok(())
    }

    /// A frame received now on the first interface, stamped with the wall clock: what a
    /// traffic tool captures in its receive loop. An error shows at the next `flush`.
    pub fn received_now(&mut self, data: &[u8]) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        if let Err(e) = self.frame(0, now, data, data.len(), Some(Direction::Inbound)) {
            self.failed.get_or_insert(e);
        }
    }

    /// Interface `iface`'s statistics at `at`: frames it saw, and frames the capture
    /// skipped (written as its drop count).
    pub fn stats(&mut self, iface: u32, at: Duration, received: u64, skipped: u64) -> Result<()> {
        let isb = InterfaceStatisticsBlock {
            interface_id: iface,
            timestamp: at.as_nanos() as u64,
            options: vec![
                InterfaceStatisticsOption::IsbIfRecv(received),
                InterfaceStatisticsOption::IsbIfDrop(skipped),
            ],
        };
        self.out.write_pcapng_block(isb)?;
        Ok(())
    }

    /// Writes out what is buffered; the first error since the last flush shows here.
    pub fn flush(&mut self) -> Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.out.get_mut().flush()?;
        Ok(())
    }
}

/// One frame read back from a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadFrame {
    pub interface: u32,
    pub at: Duration,
    pub data: Vec<u8>,
    pub original_len: u32,
    pub direction: Option<Direction>,
}

/// Opens capture `path` for reading.
fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|source| PcapError::File { what: "reading", path: path.display().to_string(), source })
}

/// What a reader's error says of `path`: not a capture it can read.
fn not_a_capture(path: &Path) -> impl Fn(pcap_file::PcapError) -> PcapError + Copy + '_ {
    move |e| PcapError::NotACapture(path.display().to_string(), e.to_string())
}

/// Reads the frames of a pcapng capture (or a classic pcap), in file order.
pub fn read_capture(path: impl AsRef<Path>) -> Result<Vec<ReadFrame>> {
    let path = path.as_ref();
    let not = not_a_capture(path);
    let mut frames = Vec::new();
    match PcapNgReader::new(open(path)?) {
        Ok(mut r) => {
            while let Some(block) = r.next_block() {
                if let Block::EnhancedPacket(p) = block.map_err(not)? {
                    let direction = p.options.iter().find_map(|o| match o {
                        EnhancedPacketOption::Flags(f) if f & 3 == 1 => Some(Direction::Inbound),
                        EnhancedPacketOption::Flags(f) if f & 3 == 2 => Some(Direction::Outbound),
                        _ => None,
                    });
                    frames.push(ReadFrame {
                        interface: p.interface_id,
                        at: p.timestamp,
                        data: p.data.into_owned(),
                        original_len: p.original_len,
                        direction,
                    });
                }
            }
        }
        Err(_) => {
            let mut r = PcapReader::new(open(path)?).map_err(not)?;
            while let Some(p) = r.next_packet() {
                let p = p.map_err(not)?;
                frames.push(ReadFrame {
                    interface: 0,
                    at: p.timestamp,
                    data: p.data.into_owned(),
                    original_len: p.orig_len,
                    direction: None,
                });
            }
        }
    }
    Ok(frames)
}

/// A pcapng capture's interface: its name and, if the file has them, its statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureInterface {
    pub name: String,
    /// Frames seen there (`isb_ifrecv`), and frames the capture skipped (`isb_ifdrop`).
    pub received: Option<u64>,
    pub dropped: Option<u64>,
}

/// The interfaces of a pcapng capture, in order, with their latest statistics.
pub fn read_interfaces(path: impl AsRef<Path>) -> Result<Vec<CaptureInterface>> {
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption as Idb;
    let path = path.as_ref();
    let not = not_a_capture(path);
    let mut r = PcapNgReader::new(open(path)?).map_err(not)?;
    let mut out: Vec<CaptureInterface> = Vec::new();
    while let Some(block) = r.next_block() {
        match block.map_err(not)? {
            Block::InterfaceDescription(d) => out.push(CaptureInterface {
                name: d
                    .options
                    .iter()
                    .find_map(|o| if let Idb::IfName(n) = o { Some(n.to_string()) } else { None })
                    .unwrap_or_default(),
                ..CaptureInterface::default()
            }),
            Block::InterfaceStatistics(st) => {
                if let Some(i) = out.get_mut(st.interface_id as usize) {
                    for o in &st.options {
                        match o {
                            InterfaceStatisticsOption::IsbIfRecv(n) => i.received = Some(*n),
                            InterfaceStatisticsOption::IsbIfDrop(n) => i.dropped = Some(*n),
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The frames' bytes of a capture, in file order.
pub fn read_frames(path: impl AsRef<Path>) -> Result<Vec<Vec<u8>>> {
    Ok(read_capture(path)?.into_iter().map(|f| f.data).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_what_it_writes_with_interfaces_directions_times_and_statistics() {
        let path = std::env::temp_dir().join(format!("pfcpcap-capture-{}.pcapng", std::process::id()));
        let mut w = CaptureWriter::create(&path).unwrap();
        let (a, b) = (w.interface("p1").unwrap(), w.interface("p2").unwrap());
        w.frame(a, Duration::from_nanos(1_000_000_123), &[1, 2, 3], 3, Some(Direction::Inbound)).unwrap();
        w.frame(b, Duration::from_nanos(2_000_000_456), &[0u8; 60], 1500, Some(Direction::Outbound)).unwrap();
        w.stats(a, Duration::from_secs(3), 10, 7).unwrap();
        w.flush().unwrap();
        drop(w);
        let frames = read_capture(&path).unwrap();
        let interfaces = read_interfaces(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(interfaces[0], CaptureInterface { name: "p1".into(), received: Some(10), dropped: Some(7) });
        assert_eq!((interfaces[1].name.as_str(), interfaces[1].received), ("p2", None));
        assert_eq!(frames.len(), 2);
        assert_eq!(
            (frames[0].interface, frames[0].at, frames[0].direction),
            (0, Duration::from_nanos(1_000_000_123), Some(Direction::Inbound))
        );
        assert_eq!((frames[1].interface, frames[1].data.len(), frames[1].original_len), (1, 60, 1500));
        assert_eq!(frames[1].direction, Some(Direction::Outbound));
    }
}
