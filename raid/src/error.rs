//! Error types, one per boundary: geometry, parity, member I/O, superblock, and the array's
//! [`RaidError`] that callers (the target) map to NVMe status. Every variant says what and
//! which member, never just "failed".

use std::io;

use thiserror::Error;

use crate::geometry::MemberIdx;
use crate::superblock::Uuid;

/// Invalid geometry or an address outside it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GeometryError {
    /// RAID-5 needs at least three members.
    #[error("RAID-5 needs at least 3 members, got {0}")]
    TooFewMembers(usize),
    /// More members than the superblock's member table holds.
    #[error("at most {max} members are supported, got {0}", max = crate::MAX_MEMBERS)]
    TooManyMembers(usize),
    /// Chunk size is not a power of two in 4 KiB ..= 16 MiB.
    #[error("chunk size {0} is not a power of two between 4 KiB and 16 MiB")]
    ChunkSize(u32),
    /// Block size is neither 512 nor 4096.
    #[error("block size {0} is not 512 or 4096")]
    BlockSize(u32),
    /// Chunk smaller than a block.
    #[error("chunk {chunk} is smaller than block {block}")]
    ChunkSmallerThanBlock {
        /// Chunk bytes.
        chunk: u32,
        /// Block bytes.
        block: u32,
    },
    /// The smallest member cannot hold one chunk of data.
    #[error("smallest member data area ({bytes} bytes) holds no {chunk}-byte chunk")]
    MemberTooSmall {
        /// Data bytes of the smallest member.
        bytes: u64,
        /// Chunk bytes.
        chunk: u32,
    },
    /// The members are too large for 64-bit byte addresses (only a corrupt superblock says so).
    #[error("member data area of {0} bytes is too large")]
    TooLarge(u64),
    /// Request outside the array, or empty.
    #[error("blocks [{start}, +{blocks}) are empty or past the capacity of {capacity} blocks")]
    OutOfRange {
        /// First block.
        start: u64,
        /// Block count.
        blocks: u64,
        /// Capacity in blocks.
        capacity: u64,
    },
}

/// Bad arguments to a parity engine.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ParityError {
    /// No source buffers.
    #[error("parity needs at least one source")]
    NoSources,
    /// A source differs in length from the destination.
    #[error("source {index} is {len} bytes, destination {expected}")]
    LengthMismatch {
        /// Index of the offending source.
        index: usize,
        /// Its length.
        len: usize,
        /// Destination length.
        expected: usize,
    },
    /// The engine's device failed (a GPU fault, or memory it could not map). After a fault
    /// during an accumulate (`xor_acc`) the destination may hold partial results.
    #[error("{engine}: device failure: {reason}")]
    Device {
        /// Engine name.
        engine: &'static str,
        /// What the device reported.
        reason: String,
    },
}

/// A member operation failed.
#[derive(Debug, Error)]
pub enum MemberError {
    /// The operating system reported an error.
    #[error("{member}: I/O error at byte {offset}: {source}")]
    Io {
        /// Member name.
        member: String,
        /// Byte offset of the operation.
        offset: u64,
        /// OS error.
        #[source]
        source: io::Error,
    },
    /// Access past the member's end.
    #[error("{member}: access [{offset}, +{len}) past the end ({size} bytes)")]
    OutOfRange {
        /// Member name.
        member: String,
        /// Byte offset.
        offset: u64,
        /// Length.
        len: usize,
        /// Member size.
        size: u64,
    },
    /// Buffer address, offset or length not aligned for direct I/O.
    #[error("{member}: direct I/O needs {align}-byte alignment (offset {offset}, len {len})")]
    Misaligned {
        /// Member name.
        member: String,
        /// Required alignment.
        align: usize,
        /// Byte offset.
        offset: u64,
        /// Length.
        len: usize,
    },
    /// The device disappeared.
    #[error("{member}: device vanished")]
    Vanished {
        /// Member name.
        member: String,
    },
    /// A fault-injecting wrapper failed the operation.
    #[error("{member}: injected I/O error at byte {offset}")]
    Injected {
        /// Member name.
        member: String,
        /// Byte offset.
        offset: u64,
    },
    /// The operation cannot go the way it was asked (e.g. a member without a descriptor for
    /// a poller's ring); nothing was done, the caller takes another way.
    #[error("not supported here: {0}")]
    Unsupported(&'static str),
    /// Opening the member failed.
    #[error("{member}: cannot open: {source}")]
    Open {
        /// Path.
        member: String,
        /// OS error.
        #[source]
        source: io::Error,
    },
}

/// A superblock could not be read, decoded or generated.
#[derive(Debug, Error)]
pub enum SuperblockError {
    /// Fewer than 4096 bytes.
    #[error("superblock buffer is {0} bytes, need 4096")]
    Short(usize),
    /// No Raidline magic: not a member of any array.
    #[error("no Raidline superblock (magic missing)")]
    NoMagic,
    /// Checksum mismatch.
    #[error("superblock checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// Unknown format version.
    #[error("unsupported superblock version {0}")]
    Version(u32),
    /// A field holds an impossible value.
    #[error("superblock field {field} has invalid value {value}")]
    BadField {
        /// Field name.
        field: &'static str,
        /// Value found.
        value: u64,
    },
    /// Reading the kernel's random source failed.
    #[error("cannot read /dev/urandom: {0}")]
    Random(#[source] io::Error),
}

/// Why assembly refused one member.
#[derive(Debug, Error)]
pub enum RefuseReason {
    /// Its superblock cannot be read.
    #[error("superblock unreadable: {0}")]
    Unreadable(#[source] MemberError),
    /// No valid superblock.
    #[error("{0}")]
    BadSuperblock(#[source] SuperblockError),
    /// It belongs to another array.
    #[error("belongs to array {found}, not {expected}")]
    Foreign {
        /// UUID being assembled.
        expected: Uuid,
        /// UUID in its superblock.
        found: Uuid,
    },
    /// It missed updates the others saw.
    #[error("stale: event count {events} < current {current}")]
    Stale {
        /// Its event count.
        events: u64,
        /// The newest event count among the members.
        current: u64,
    },
    /// The current member table marks its role failed.
    #[error("role {role} is marked failed in the current superblocks")]
    MarkedFailed {
        /// Its role.
        role: usize,
    },
    /// Its identity does not match the member table (the role was given to another device).
    #[error("role {role} belongs to member {owner}, this is {found}")]
    Replaced {
        /// Its role.
        role: usize,
        /// Member UUID the table records.
        owner: Uuid,
        /// Its member UUID.
        found: Uuid,
    },
    /// Another member already holds the same role.
    #[error("role {role} is already held by {other}")]
    Duplicate {
        /// The role.
        role: usize,
        /// Name of the member holding it.
        other: String,
    },
    /// Geometry differs from the array's.
    #[error("geometry differs from the array's")]
    GeometryMismatch,
}

/// A member refused at assembly, with its name.
#[derive(Debug, Error)]
#[error("member {member} refused: {reason}")]
pub struct Refused {
    /// Member name.
    pub member: String,
    /// Why.
    #[source]
    pub reason: RefuseReason,
}

/// Errors from the array.
#[derive(Debug, Error)]
pub enum RaidError {
    /// Bad geometry or address.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    /// Request buffer is not a whole number of blocks, or is empty.
    #[error("buffer of {len} bytes is not a non-zero multiple of the {block}-byte block")]
    BufferSize {
        /// Buffer length.
        len: usize,
        /// Block size.
        block: usize,
    },
    /// The buffer's address is not aligned as the members' direct I/O needs.
    #[error("buffer address {addr:#x} is not aligned to {align} bytes (members use direct I/O)")]
    Misaligned {
        /// Buffer address.
        addr: usize,
        /// Alignment needed.
        align: usize,
    },
    /// Parity engine misuse (an internal bug if it ever appears).
    #[error(transparent)]
    Parity(#[from] ParityError),
    /// Too many members failed: the array stopped rather than return wrong data.
    #[error(
        "array failed: members {failed:?} are unavailable; RAID-5 survives only one ({cause})"
    )]
    ArrayFailed {
        /// Roles failed.
        failed: Vec<usize>,
        /// The error that caused the last failure.
        cause: String,
    },
    /// A member needed for this operation failed (e.g. a spare during rebuild).
    #[error("member {role:?} failed: {source}")]
    Member {
        /// Role.
        role: MemberIdx,
        /// What happened.
        #[source]
        source: MemberError,
    },
    /// A device being added (spare, hot-replace member) failed while its metadata area was
    /// being prepared; it was not added.
    #[error("preparing the new member: {0}")]
    NewMember(#[source] MemberError),
    /// Creating an array needs members of at least this many bytes.
    #[error("member {member} is too small ({size} bytes) for the metadata area")]
    MemberTooSmall {
        /// Member name.
        member: String,
        /// Its size.
        size: u64,
    },
    /// Superblock problem on creation.
    #[error(transparent)]
    Superblock(#[from] SuperblockError),
    /// Assembly could not start the array.
    #[error("cannot assemble: {reason}{}", refused_list(refused))]
    Assemble {
        /// Why.
        reason: String,
        /// Members refused on the way.
        refused: Vec<Refused>,
    },
    /// Assembly refused to start an array that stopped uncleanly and is now missing a member
    /// that no partial-parity log covers (md's refusal without `start_dirty_degraded`): the
    /// missing member's data in the dirty regions may reconstruct wrong. Start it anyway with
    /// [`crate::AssembleOptions::start_dirty_degraded`] (the daemon's
    /// `raidline array start --accept-dirty-degraded`).
    #[error(
        "unclean stop and role(s) {missing:?} missing with no log covering it ({reason}): \
         parity in {dirty_regions} dirty bitmap region(s) may be torn, so the missing \
         member's data there may reconstruct wrong; start with start_dirty_degraded \
         (raidline array start --accept-dirty-degraded) to accept"
    )]
    WriteHoleExposed {
        /// Roles missing.
        missing: Vec<usize>,
        /// Dirty bitmap regions (the stripes that may be torn).
        dirty_regions: u64,
        /// Why the log does not cover the stop.
        reason: String,
        /// Members refused on the way.
        refused: Vec<Refused>,
    },
    /// The operation needs a state the array is not in (e.g. rebuild with nothing to rebuild).
    #[error("{0}")]
    State(&'static str),
}

/// Coarse class of a [`RaidError`], for the one place in the target that maps errors to
/// NVMe status (out of range / invalid field, unrecovered read or write fault, internal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The request itself is wrong (range, size, alignment): the host's mistake, retrying
    /// will not help.
    InvalidRequest,
    /// The data cannot be read or written (array failed, member lost during a rebuild):
    /// report a media/device error.
    Unavailable,
    /// A bug or an impossible state inside the engine.
    Internal,
}

impl RaidError {
    /// The class of this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            RaidError::Geometry(_)
            | RaidError::BufferSize { .. }
            | RaidError::Misaligned { .. } => ErrorClass::InvalidRequest,
            RaidError::ArrayFailed { .. }
            | RaidError::Member { .. }
            | RaidError::MemberTooSmall { .. }
            | RaidError::NewMember(_)
            | RaidError::Assemble { .. }
            | RaidError::WriteHoleExposed { .. } => ErrorClass::Unavailable,
            RaidError::Parity(_) | RaidError::Superblock(_) | RaidError::State(_) => {
                ErrorClass::Internal
            }
        }
    }
}

/// "; refused: [a; b]" for the members assembly refused, nothing when none was.
fn refused_list(refused: &[Refused]) -> String {
    if refused.is_empty() {
        return String::new();
    }
    let each: Vec<String> = refused.iter().map(ToString::to_string).collect();
    format!("; refused: [{}]", each.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_messages_name_what_and_which() {
        let oor = RaidError::Geometry(GeometryError::OutOfRange {
            start: 10,
            blocks: 2,
            capacity: 11,
        });
        assert_eq!(oor.class(), ErrorClass::InvalidRequest);
        assert!(oor.to_string().contains("capacity of 11"));
        let dead = RaidError::ArrayFailed {
            failed: vec![1, 3],
            cause: "d3: device vanished".into(),
        };
        assert_eq!(dead.class(), ErrorClass::Unavailable);
        assert!(dead.to_string().contains("[1, 3]") && dead.to_string().contains("d3"));
        assert_eq!(RaidError::State("x").class(), ErrorClass::Internal);
        let refused = Refused {
            member: "/dev/nvme2n1".into(),
            reason: RefuseReason::Stale {
                events: 4,
                current: 9,
            },
        };
        assert_eq!(
            refused.to_string(),
            "member /dev/nvme2n1 refused: stale: event count 4 < current 9"
        );
    }
}
