//! IEEE 802.3x PAUSE and 802.1Qbb priority flow control frames.
//!
//! ```text
//!  0  destination 01:80:C2:00:00:01      6  source (the sender's port MAC)
//! 12  EtherType 0x8808                  14  opcode: 0x0001 PAUSE, 0x0101 PFC
//! PAUSE: 16 pause_time (u16)
//! PFC:   16 class-enable vector (u16; upper byte reserved, zero; bit n = priority n)
//!        18 time[0..8] (u16 each, big-endian)
//!        34 padding to the 60-byte minimum (may carry a DCFIT checking message)
//! ```
//!
//! One quantum is 512 bit times at the link's speed; zero quanta resumes at once.

use super::checking::CheckingMessage;
use super::mac::MacAddr;
use super::priorities::{Priorities, Priority};

/// The MAC control EtherType.
pub const MAC_CONTROL_ETHERTYPE: u16 = 0x8808;
/// 802.3x PAUSE opcode.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// PFC (802.1Qbb) opcode.
pub const OPCODE_PFC: u16 = 0x0101;
/// The reserved group address MAC control frames are sent to.
pub const PAUSE_DESTINATION: MacAddr = MacAddr([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
pub use pfcswitch_config::speed::MIN_FRAME_LEN;
/// Where an 802.3x PAUSE frame's fields end (after its quanta).
pub const PAUSE_FIELDS_END: usize = 18;
/// Where a PFC frame's fields end (after the eight timers); DCFIT messages ride in the padding
/// after it.
pub const PFC_FIELDS_END: usize = 34;
pub use super::priorities::PRIORITIES;

/// A priority flow control request: for each enabled priority, pause for `quanta[p]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pfc {
    /// The class-enable vector: `quanta[n]` applies to each priority n in it.
    pub enabled: Priorities,
    /// Per priority: pause quanta (512 bit times each); 0 resumes at once.
    pub quanta: [u16; PRIORITIES],
    /// A DCFIT checking message riding in the padding, if any.
    pub checking: Option<CheckingMessage>,
}

impl Pfc {
    /// Pause every priority in `priorities` for `quanta`.
    pub fn pause(priorities: Priorities, quanta: u16) -> Pfc {
        let mut pfc = Pfc { enabled: priorities, ..Pfc::default() };
        for p in priorities.iter() {
            pfc.quanta[p] = quanta;
        }
        pfc
    }

    /// Enabled priorities with their quanta.
    pub fn classes(&self) -> impl Iterator<Item = (Priority, u16)> + '_ {
        self.enabled.iter().map(|p| (p, self.quanta[p]))
    }
}

/// A MAC control frame's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MacControl {
    /// 802.3x: stop the whole link for `quanta`.
    /// An 802.3x PAUSE for the whole link.
    Pause {
        /// The pause, in quanta of 512 bit times; 0 resumes at once.
        quanta: u16,
    },
    /// 802.1Qbb: stop individual priorities.
    Pfc(Pfc),
}

/// A decoded MAC control frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlFrame {
    /// The sender.
    pub src: MacAddr,
    /// What it says.
    pub body: MacControl,
    /// It arrived shorter than Ethernet's minimum and was read as a NIC would have sent
    /// it, padded with zeros.
    pub short: bool,
}

/// Declares [`ControlReject`] and [`RejectCounters`] from one list: each reason, what
/// it says as an error, and its counter (the counter's name is its JSON key and its
/// Prometheus `reason` label); a short title for text tables.
macro_rules! control_rejects {
    ($( $(#[doc = $doc:literal])* $variant:ident => $field:ident, $title:literal, $msg:literal; )*) => {
        /// Why a MAC control frame was not acted on. Each reason has its own counter.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
        pub enum ControlReject {
            $( $(#[doc = $doc])* #[error($msg)] $variant, )*
        }

        impl ControlReject {
            /// Every reason, in counter order.
            pub const ALL: &'static [ControlReject] = &[$(ControlReject::$variant),*];

            /// The reason's position in [`ControlReject::ALL`].
            pub fn index(self) -> usize {
                self as usize
            }

            /// The reason's counter name.
            pub const fn name(self) -> &'static str {
                match self {
                    $(ControlReject::$variant => stringify!($field),)*
                }
            }

            /// A short column title for text tables.
            pub const fn title(self) -> &'static str {
                match self {
                    $(ControlReject::$variant => $title,)*
                }
            }
        }

        /// MAC control frames the decoder rejected, per reason.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        pub struct RejectCounters {
            $( $(#[doc = $doc])* pub $field: u64, )*
        }

        impl RejectCounters {
            /// Counts one frame rejected for `reason`.
            pub fn count(&mut self, reason: ControlReject) {
                match reason {
                    $(ControlReject::$variant => self.$field += 1,)*
                }
            }

            /// Frames rejected for `reason`.
            pub fn get(&self, reason: ControlReject) -> u64 {
                match reason {
                    $(ControlReject::$variant => self.$field,)*
                }
            }
        }
    };
}

control_rejects! {
    /// Shorter than its opcode's fields.
    Truncated => truncated, "truncated", "frame too short for its opcode's fields";
    /// An opcode other than PAUSE and PFC.
    UnknownOpcode => unknown_opcode, "opcode", "opcode is neither PAUSE (0x0001) nor PFC (0x0101)";
    /// Sent neither to 01:80:C2:00:00:01 nor to this port.
    WrongDestination => wrong_destination, "dest", "destination is not 01:80:c2:00:00:01";
    /// Bits the standard reserves are set in the class-enable vector.
    ReservedBits => reserved_bits, "reserved", "reserved upper byte of the class-enable vector is not zero";
    /// A PFC frame that enables no priority.
    NoClassEnabled => no_class_enabled, "no class", "class-enable vector enables no priority";
}

/// Decodes a frame whose EtherType is 0x8808, received on a port whose MAC is `own_mac`.
///
/// 802.3 Annex 31B lets a PAUSE go either to the reserved group address or to the
/// receiving station's own address; 802.1Qbb PFC only to the group address.
///
/// A frame shorter than Ethernet's 60-byte minimum is read as the NIC that sent it would
/// have put it on a wire, its missing bytes zero, and marked `short`: a veth delivers what
/// a raw socket wrote unpadded, and SONiC's storm script (sonic-mgmt's `pfc_gen.py`)
/// writes 18-byte PAUSE frames and 32-byte PFC frames that leave out class 7's timer.
/// What no padding explains stays truncated: a frame that ends inside its opcode, the
/// PAUSE time, the class-enable vector or one of the timers.
pub fn decode(frame: &[u8], own_mac: MacAddr) -> Result<ControlFrame, ControlReject> {
    if frame.len() >= MIN_FRAME_LEN {
        return decode_padded(frame, own_mac, false);
    }
    let fields_end = match frame.get(14..16).map(|o| u16::from_be_bytes([o[0], o[1]])) {
        None => return Err(ControlReject::Truncated),
        Some(OPCODE_PAUSE) => PAUSE_FIELDS_END,
        // The vector at least; then whole timers.
        Some(OPCODE_PFC) if frame.len() >= 18 && frame.len().is_multiple_of(2) => frame.len(),
        Some(OPCODE_PFC) => return Err(ControlReject::Truncated),
        Some(_) => 16,
    };
    if frame.len() < fields_end {
        return Err(ControlReject::Truncated);
    }
    let mut padded = [0u8; MIN_FRAME_LEN];
    padded[..frame.len()].copy_from_slice(frame);
    decode_padded(&padded, own_mac, true)
}

fn decode_padded(frame: &[u8], own_mac: MacAddr, short: bool) -> Result<ControlFrame, ControlReject> {
    let dst = MacAddr::from_slice(frame);
    let src = MacAddr::from_slice(&frame[6..]);
    let opcode = be16(frame, 14);
    match opcode {
        OPCODE_PAUSE => {
            if frame.len() < PAUSE_FIELDS_END {
                return Err(ControlReject::Truncated);
            }
            if dst != PAUSE_DESTINATION && dst != own_mac {
                return Err(ControlReject::WrongDestination);
            }
            Ok(ControlFrame { src, body: MacControl::Pause { quanta: be16(frame, 16) }, short })
        }
        OPCODE_PFC => {
            if frame.len() < PFC_FIELDS_END {
                return Err(ControlReject::Truncated);
            }
            if dst != PAUSE_DESTINATION {
                return Err(ControlReject::WrongDestination);
            }
            let vector = be16(frame, 16);
            if vector & 0xff00 != 0 {
                return Err(ControlReject::ReservedBits);
            }
            if vector == 0 {
                return Err(ControlReject::NoClassEnabled);
            }
            let mut pfc = Pfc { enabled: Priorities::from_bits(vector as u8), ..Pfc::default() };
            for (p, q) in pfc.quanta.iter_mut().enumerate() {
                *q = be16(frame, 18 + 2 * p);
            }
            pfc.checking = CheckingMessage::decode(&frame[PFC_FIELDS_END..]);
            Ok(ControlFrame { src, body: MacControl::Pfc(pfc), short })
        }
        _ => Err(ControlReject::UnknownOpcode),
    }
}

/// Writes a complete, padded frame into `buf` and returns its length (60).
///
/// Encodes exactly what it is given, so test tools can build invalid frames too
/// (a zero class-enable vector, a zero source).
pub fn encode(buf: &mut [u8], src: MacAddr, body: &MacControl) -> usize {
    let frame = &mut buf[..MIN_FRAME_LEN];
    frame.fill(0);
    frame[..6].copy_from_slice(&PAUSE_DESTINATION.0);
    frame[6..12].copy_from_slice(&src.0);
    frame[12..14].copy_from_slice(&MAC_CONTROL_ETHERTYPE.to_be_bytes());
    match body {
        MacControl::Pause { quanta } => {
            frame[14..16].copy_from_slice(&OPCODE_PAUSE.to_be_bytes());
            frame[16..18].copy_from_slice(&quanta.to_be_bytes());
        }
        MacControl::Pfc(pfc) => {
            frame[14..16].copy_from_slice(&OPCODE_PFC.to_be_bytes());
            frame[16..18].copy_from_slice(&u16::from(pfc.enabled.bits()).to_be_bytes());
            for (p, q) in pfc.quanta.iter().enumerate() {
                frame[18 + 2 * p..20 + 2 * p].copy_from_slice(&q.to_be_bytes());
            }
            if let Some(msg) = &pfc.checking {
                msg.encode(&mut frame[PFC_FIELDS_END..]);
            }
        }
    }
    MIN_FRAME_LEN
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priorities::names::*;

    const OWN: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x99]);

    fn pfc_bytes(pfc: &Pfc) -> Vec<u8> {
        let mut b = vec![0xaau8; 128];
        let n = encode(&mut b, MacAddr::local(5), &MacControl::Pfc(*pfc));
        b.truncate(n);
        b
    }

    #[test]
    fn pfc_round_trips_with_the_standard_layout() {
        let mut pfc = Pfc::pause(Priorities::from_bits(0b0001_1000), 65535);
        pfc.quanta[4] = 0x1234;
        let b = pfc_bytes(&pfc);
        assert_eq!(b.len(), 60);
        assert_eq!(&b[..6], &[0x01, 0x80, 0xc2, 0, 0, 1]);
        assert_eq!(&b[12..18], &[0x88, 0x08, 0x01, 0x01, 0x00, 0x18]);
        assert_eq!(&b[24..28], &[0xff, 0xff, 0x12, 0x34]);
        assert!(b[34..].iter().all(|&x| x == 0), "padding is zero");
        let f = decode(&b, OWN).unwrap();
        assert_eq!(f.src, MacAddr::local(5));
        assert_eq!(f.body, MacControl::Pfc(pfc));
        let classes: Vec<_> = match f.body {
            MacControl::Pfc(p) => p.classes().collect(),
            _ => unreachable!(),
        };
        assert_eq!(classes, vec![(P3, 65535), (P4, 0x1234)]);
    }

    #[test]
    fn pause_round_trips_and_accepts_the_unicast_destination() {
        let mut b = vec![0u8; 60];
        encode(&mut b, MacAddr::local(1), &MacControl::Pause { quanta: 300 });
        assert_eq!(&b[14..18], &[0x00, 0x01, 0x01, 0x2c]);
        assert_eq!(decode(&b, OWN).unwrap().body, MacControl::Pause { quanta: 300 });
        b[..6].copy_from_slice(&OWN.0);
        assert_eq!(decode(&b, OWN).unwrap().body, MacControl::Pause { quanta: 300 });
        b[..6].copy_from_slice(&MacAddr::local(77).0);
        assert_eq!(decode(&b, OWN), Err(ControlReject::WrongDestination));
    }

    #[test]
    fn rejects_every_malformed_case() {
        let good = pfc_bytes(&Pfc::pause(Priorities::only(P3), 100));
        for len in [0, 13, 15, 16, 33] {
            assert_eq!(decode(&good[..len], OWN), Err(ControlReject::Truncated), "len {len}");
        }
        assert!(decode(&good[..34], OWN).is_ok(), "all fields present is enough");

        let mut b = good.clone();
        b[14..16].copy_from_slice(&[0x00, 0x02]);
        assert_eq!(decode(&b, OWN), Err(ControlReject::UnknownOpcode));

        let mut b = good.clone();
        b[16] = 0x01;
        assert_eq!(decode(&b, OWN), Err(ControlReject::ReservedBits));

        let b = pfc_bytes(&Pfc::default());
        assert_eq!(decode(&b, OWN), Err(ControlReject::NoClassEnabled));

        let mut b = good.clone();
        b[..6].copy_from_slice(&OWN.0);
        assert_eq!(decode(&b, OWN), Err(ControlReject::WrongDestination), "PFC only to the group address");

        let mut b = vec![0u8; 60];
        encode(&mut b, MacAddr::ZERO, &MacControl::Pause { quanta: 1 });
        assert_eq!(decode(&b[..17], OWN), Err(ControlReject::Truncated));
    }

    /// The frames sonic-mgmt's `pfc_gen.py` writes to a raw socket: destination, source,
    /// EtherType and opcode, then the PAUSE time, or the class-enable vector and the
    /// timers of classes 0 to 6 only.
    fn sonic_storm_frame(global: bool, classes: u8, time: u16) -> Vec<u8> {
        let mut f = PAUSE_DESTINATION.0.to_vec();
        f.extend([0, 1, 2, 3, 4, 5]);
        f.extend(MAC_CONTROL_ETHERTYPE.to_be_bytes());
        if global {
            f.extend(OPCODE_PAUSE.to_be_bytes());
            f.extend(time.to_be_bytes());
        } else {
            f.extend(OPCODE_PFC.to_be_bytes());
            f.extend(u16::from(classes).to_be_bytes());
            for p in 0..7 {
                f.extend(if classes & (1 << p) != 0 { time } else { 0 }.to_be_bytes());
            }
        }
        f
    }

    #[test]
    fn an_unpadded_frame_is_read_as_its_nic_would_have_padded_it_and_marked_short() {
        let pfc = sonic_storm_frame(false, 0b1000_1000, 65535);
        assert_eq!(pfc.len(), 32);
        let d = decode(&pfc, OWN).unwrap();
        assert!(d.short);
        let MacControl::Pfc(p) = d.body else { panic!("{d:?}") };
        // Class 7's timer was left out: zero, as padding makes it (a resume for 7).
        assert_eq!(p.classes().collect::<Vec<_>>(), vec![(P3, 65535), (P7, 0)]);
        assert_eq!(p.checking, None);
        let pause = sonic_storm_frame(true, 0, 300);
        assert_eq!(pause.len(), 18);
        assert_eq!(decode(&pause, OWN).map(|d| (d.body, d.short)), Ok((MacControl::Pause { quanta: 300 }, true)));
        // Full-length frames are not short.
        assert!(!decode(&pfc_bytes(&Pfc::pause(Priorities::only(P3), 1)), OWN).unwrap().short);
        // What padding cannot explain: cut inside the opcode, the time, the vector, a timer.
        for cut in [&pause[..15], &pause[..17], &pfc[..17], &pfc[..31], &pfc[..21]] {
            assert_eq!(decode(cut, OWN), Err(ControlReject::Truncated), "{} bytes", cut.len());
        }
        // An unknown opcode is that, however short.
        let mut other = pause.clone();
        other[15] = 0x02;
        assert_eq!(decode(&other[..16], OWN), Err(ControlReject::UnknownOpcode));
    }

    #[test]
    fn zero_source_is_still_decoded() {
        let mut b = vec![0u8; 60];
        encode(&mut b, MacAddr::ZERO, &MacControl::Pfc(Pfc::pause(Priorities::only(P0), 5)));
        assert_eq!(decode(&b, OWN).unwrap().src, MacAddr::ZERO);
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let _ = decode(&bytes, OWN);
        }

        #[test]
        fn any_valid_pfc_round_trips(enabled in 1u8.., quanta in proptest::array::uniform8(proptest::num::u16::ANY)) {
            let pfc = Pfc { enabled: Priorities::from_bits(enabled), quanta, checking: None };
            let b = pfc_bytes(&pfc);
            proptest::prop_assert_eq!(decode(&b, OWN).unwrap().body, MacControl::Pfc(pfc));
        }
    }
}
