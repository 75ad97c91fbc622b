//! DCFIT checking messages, carried in the padding of PFC pause frames.
//!
//! The padding after the eight quanta (bytes 34..60) is ignored by 802.1Qbb receivers,
//! so a frame with a checking message is still a plain, valid PFC frame to Wireshark
//! and to any device that does not know DCFIT.
//!
//! ```text
//! 34  magic "DCFT" (0x44434654)   38  version (1)   39  flags (reserved, 0)
//! 40  origin switch id (u32)      44  origin port (u16)
//! 46  sequence number (u32)       50  hops travelled so far (u16)
//! 52  priorities (bit mask) whose pauses the message follows; 0: every priority the
//!     frame pauses (as version 1 senders before this field wrote it)
//! 53  reserved, zero up to byte 60
//! ```

use super::priorities::Priorities;

/// Marks the padding as a checking message: "DCFT".
pub const MAGIC: u32 = 0x4443_4654;
/// The format version a checking message carries; others are ignored.
pub const VERSION: u8 = 1;
/// Bytes a checking message takes in the padding.
pub const ENCODED_LEN: usize = 19;

/// A DCFIT checking message: the switch and port that originated it, its sequence number, the pause
/// hops it has made and the priorities it follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CheckingMessage {
    /// The switch that originated the message.
    pub origin_switch: u32,
    /// The port on the origin switch whose pause started the chain.
    pub origin_port: u16,
    /// Per-origin sequence number, so a stale message can be told from a new one.
    pub seq: u32,
    /// How many pause hops the message has crossed; the cycle length when it comes home.
    pub hops: u16,
    /// The priorities whose pauses the message follows on this hop: a cycle of pauses
    /// is one of buffers only where each hop's traffic waits in a queue the next pause
    /// stops, and under Tagger's tables that is not always the same priority.
    #[serde(default)]
    pub prios: Priorities,
}

impl CheckingMessage {
    /// Reads a checking message from PFC padding; `None` when the padding is plain.
    pub fn decode(padding: &[u8]) -> Option<CheckingMessage> {
        if padding.len() < ENCODED_LEN {
            return None;
        }
        let u32_at = |i: usize| u32::from_be_bytes([padding[i], padding[i + 1], padding[i + 2], padding[i + 3]]);
        let u16_at = |i: usize| u16::from_be_bytes([padding[i], padding[i + 1]]);
        if u32_at(0) != MAGIC || padding[4] != VERSION {
            return None;
        }
        Some(CheckingMessage {
            origin_switch: u32_at(6),
            origin_port: u16_at(10),
            seq: u32_at(12),
            hops: u16_at(16),
            prios: Priorities::from_bits(padding[18]),
        })
    }

    /// Writes the message at the start of `padding` (at least [`ENCODED_LEN`] bytes).
    pub fn encode(&self, padding: &mut [u8]) {
        padding[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        padding[4] = VERSION;
        padding[5] = 0;
        padding[6..10].copy_from_slice(&self.origin_switch.to_be_bytes());
        padding[10..12].copy_from_slice(&self.origin_port.to_be_bytes());
        padding[12..16].copy_from_slice(&self.seq.to_be_bytes());
        padding[16..18].copy_from_slice(&self.hops.to_be_bytes());
        padding[18] = self.prios.bits();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mac::MacAddr;
    use crate::pfc::{self, MacControl, Pfc};
    use crate::priorities::names::*;

    #[test]
    fn rides_in_pfc_padding_and_the_frame_stays_plain_pfc() {
        let msg = CheckingMessage { origin_switch: 7, origin_port: 2, seq: 41, hops: 3, prios: Priorities::only(P3) };
        let mut with = Pfc::pause(Priorities::only(P3), 1000);
        with.checking = Some(msg);
        let mut b = [0u8; 60];
        assert_eq!(pfc::encode(&mut b, MacAddr::local(1), &MacControl::Pfc(with)), 60);
        assert_eq!(&b[34..38], b"DCFT");

        let decoded = pfc::decode(&b, MacAddr::local(9)).unwrap();
        assert_eq!(decoded.body, MacControl::Pfc(with));

        // A receiver that ignores the padding sees exactly the plain frame's fields.
        let mut plain = [0u8; 60];
        pfc::encode(&mut plain, MacAddr::local(1), &MacControl::Pfc(Pfc::pause(Priorities::only(P3), 1000)));
        assert_eq!(b[..34], plain[..34]);
        assert_eq!(b.len(), plain.len());
    }

    #[test]
    fn plain_or_foreign_padding_is_no_message() {
        assert_eq!(CheckingMessage::decode(&[0u8; 26]), None);
        assert_eq!(CheckingMessage::decode(&b"DCFT"[..]), None);
        let mut p = [0u8; 26];
        CheckingMessage { origin_switch: 1, origin_port: 1, seq: 1, hops: 0, prios: Priorities::NONE }.encode(&mut p);
        p[4] = 2;
        assert_eq!(CheckingMessage::decode(&p), None, "unknown version");
    }
}
