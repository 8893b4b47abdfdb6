//! The 16-byte Completion Queue Entry (Base §4.6, Figure 89).
//!
//! DW0–DW1: command specific result (Property Get returns up to 8 bytes here; Connect returns
//! the controller id in DW0). DW2: SQ head pointer (15:0), SQ identifier (31:16). DW3: command
//! identifier (15:0), phase tag (16), status (31:17). Over fabrics the phase tag is not used by
//! hosts; it is carried as given.

use crate::bytes::{le16, le64, put_le16, put_le64};
use crate::error::{exact, room, ParseError};
use crate::status::Status;

/// Size of a completion queue entry (IOCQES = 4).
pub const CQE_LEN: usize = 16;

mod field {
    use crate::bytes::Field;
    pub const RESULT: Field = 0..8;
    pub const SQ_HEAD: Field = 8..10;
    pub const SQ_ID: Field = 10..12;
    pub const CID: Field = 12..14;
    pub const STATUS_PHASE: Field = 14..16;
}

/// A completion queue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cqe {
    /// Command specific result, DW0 in the low 32 bits and DW1 in the high 32 bits.
    pub result: u64,
    /// SQ head pointer: how far the controller has consumed the submission queue.
    pub sq_head: u16,
    /// Submission queue identifier.
    pub sq_id: u16,
    /// Command identifier of the completed command.
    pub cid: u16,
    /// Phase tag.
    pub phase: bool,
    /// Status.
    pub status: Status,
}

impl Default for Status {
    fn default() -> Self {
        Status::SUCCESS
    }
}

impl Cqe {
    /// Parses exactly 16 bytes (every 16-byte string is a valid CQE).
    pub fn parse(b: &[u8]) -> Result<Cqe, ParseError> {
        exact("CQE", b, CQE_LEN)?;
        let sp = le16(b, field::STATUS_PHASE);
        Ok(Cqe {
            result: le64(b, field::RESULT),
            sq_head: le16(b, field::SQ_HEAD),
            sq_id: le16(b, field::SQ_ID),
            cid: le16(b, field::CID),
            phase: sp & 1 != 0,
            status: Status::from_field(sp >> 1),
        })
    }

    /// Writes exactly 16 bytes.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room("CQE", b, CQE_LEN)?;
        put_le64(b, field::RESULT, self.result);
        put_le16(b, field::SQ_HEAD, self.sq_head);
        put_le16(b, field::SQ_ID, self.sq_id);
        put_le16(b, field::CID, self.cid);
        put_le16(
            b,
            field::STATUS_PHASE,
            self.status.to_field() << 1 | u16::from(self.phase),
        );
        Ok(())
    }

    /// The entry as 16 bytes.
    pub fn to_bytes(&self) -> [u8; CQE_LEN] {
        let mut b = [0u8; CQE_LEN];
        // Cannot fail: the buffer has the exact size.
        let _ = self.emit(&mut b);
        b
    }

    /// DW0 of the result.
    pub fn dw0(&self) -> u32 {
        self.result as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::StatusCode;
    use proptest::prelude::*;

    #[test]
    fn layout_matches_figure_89() {
        let c = Cqe {
            result: 0x0000_0001_0000_0005, // e.g. Connect: cntlid 5
            sq_head: 7,
            sq_id: 2,
            cid: 0x1234,
            phase: true,
            status: Status::new(StatusCode::INVALID_FIELD).dnr(),
        };
        let b = c.to_bytes();
        assert_eq!(
            b,
            [
                0x05, 0, 0, 0, 0x01, 0, 0, 0, // DW0, DW1
                0x07, 0x00, 0x02, 0x00, // SQHD, SQID
                0x34, 0x12, // CID
                0x05, 0x80, // phase 1, SC 0x02 << 1, DNR bit 15
            ]
        );
        assert_eq!(Cqe::parse(&b).unwrap(), c);
        assert_eq!(c.dw0(), 5);
    }

    proptest! {
        #[test]
        fn any_16_bytes_round_trip(b in proptest::array::uniform16(any::<u8>())) {
            let c = Cqe::parse(&b).unwrap();
            prop_assert_eq!(c.to_bytes(), b);
        }
    }
}
