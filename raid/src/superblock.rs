//! On-member superblock: identity, geometry, event counter, clean/dirty state, member table,
//! metadata locations. One 4 KiB block at byte 0 of every member (spares included).
//!
//! Member layout (bytes): `[0, 4096)` superblock; `[bitmap_offset, +bitmap_bytes)`
//! write-intent bitmap; `[ppl_offset, +ppl_bytes)` reserved for the partial-parity log;
//! `[data_offset, +member_data_bytes)` the RAID data area. All offsets are multiples of 4096.
//!
//! Encoding: little-endian, fixed offsets (see `mod field`), CRC-32C over bytes
//! `[0, 4092)` stored at 4092. Parsing is total: any byte string yields a superblock or a
//! typed [`SuperblockError`]; nothing panics. The event counter increases on every
//! superblock update, so among members of one array the highest count is current and a
//! lower count means the member missed updates (stale).
//!
//! Hot replace: while a role is being copied onto a new member, every member's table records
//! the copy (role, first stripe not yet copied, the new member's UUID) and the new member's
//! own role is [`Role::Replacement`]; once the copy is done the new member holds the role and
//! the old one's last superblock says [`Role::Former`], so assembly refuses it. Superblocks
//! written before hot replace existed have zeros there, which read as "no copy running".

use crate::error::SuperblockError;
use crate::geometry::{BlockSize, ChunkSize};
use crate::MAX_MEMBERS;

/// Superblock size in bytes.
pub const SB_BYTES: usize = 4096;
/// Default start of the data area: 1 MiB, leaving room for the bitmap and the log.
pub const DEFAULT_DATA_OFFSET: u64 = 1 << 20;
const MAGIC: [u8; 8] = *b"RLRAID5\0";
/// Version 2 added the log flags and UUID-carrying log entries (format 2); version 1
/// superblocks still assemble (their arrays' log entries are format 1), and a build that
/// knows only version 1 refuses a version 2 array instead of misreading its log.
const VERSION: u32 = 2;
/// The oldest version still read.
const OLDEST_VERSION: u32 = 1;
/// Role value of a spare.
const ROLE_SPARE: u32 = u32::MAX;
/// "No rebuild in progress".
const NO_REBUILD: u32 = u32::MAX;
/// Role flag: the member is the replacement being copied for role `r` (low bits).
const ROLE_REPLACEMENT: u32 = 0x4000_0000;
/// Role flag: the member held role `r` (low bits) until a replacement took it over.
const ROLE_FORMER: u32 = 0x2000_0000;

/// Log flag: the partial-parity log is switched off (writes are not logged).
const PPL_OFF: u32 = 1;
/// Log flag: writes not logged under the current epoch may still have been in flight.
const PPL_UNCOVERED: u32 = 2;
/// Log flag: write-hole policy "always" (healthy writes are logged too). Builds before the
/// policy existed ignore it and treat the array as "degraded", which refuses rather than
/// misreads: their recovery never replays an older epoch's entries.
const PPL_ALWAYS: u32 = 4;
/// Log flag: the array was started over an unclean stop no log covered, and not rebuilt
/// since: the set bitmap bits include the regions whose parity may be torn.
const PPL_EXPOSED: u32 = 8;

/// Field offsets within the superblock.
mod field {
    pub const MAGIC: usize = 0x000;
    pub const VERSION: usize = 0x008;
    pub const ARRAY_UUID: usize = 0x010;
    pub const MEMBER_UUID: usize = 0x020;
    pub const ROLE: usize = 0x030;
    pub const MEMBERS: usize = 0x034;
    pub const CHUNK: usize = 0x038;
    pub const BLOCK: usize = 0x03C;
    pub const DATA_OFFSET: usize = 0x040;
    pub const MEMBER_DATA_BYTES: usize = 0x048;
    pub const EVENTS: usize = 0x050;
    pub const STATE: usize = 0x058;
    pub const BITMAP_OFFSET: usize = 0x060;
    pub const BITMAP_BYTES: usize = 0x068;
    pub const BITMAP_REGION_STRIPES: usize = 0x070;
    pub const PPL_OFFSET: usize = 0x078;
    pub const PPL_BYTES: usize = 0x080;
    pub const REBUILD_ROLE: usize = 0x084;
    pub const REBUILD_CHECKPOINT: usize = 0x088;
    pub const RESYNC_CHECKPOINT: usize = 0x090;
    pub const PPL_EPOCH: usize = 0x098;
    /// Role being copied onto a replacement, plus one (0: no copy running).
    pub const REPLACE_ROLE: usize = 0x0A0;
    /// First stripe not yet copied onto the replacement.
    pub const REPLACE_CHECKPOINT: usize = 0x0A8;
    /// Member UUID of the replacement.
    pub const REPLACE_UUID: usize = 0x0B0;
    /// Partial-parity-log flags: [`super::PPL_OFF`], [`super::PPL_UNCOVERED`]. Zero (log on,
    /// covered) in superblocks written before the flags existed, which is what they meant.
    pub const PPL_FLAGS: usize = 0x0C0;
    /// Policy "always": the oldest log epoch whose entries recovery replays (rounds planned
    /// under it may still have been writing). Zero in older superblocks; read only with
    /// [`super::PPL_ALWAYS`].
    pub const PPL_REPLAY_FROM: usize = 0x0C8;
    /// One byte per role: [`super::SlotState`].
    pub const ROLE_STATES: usize = 0x100;
    /// 16 bytes per role: the member UUID holding that role.
    pub const ROLE_UUIDS: usize = 0x200;
    pub const CRC: usize = 0xFFC;
}

/// 16-byte array or member identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// A random UUID (version 4 bits set) from the kernel's random source.
    pub fn random() -> Result<Uuid, SuperblockError> {
        use std::io::Read;
        let mut b = [0u8; 16];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut b))
            .map_err(SuperblockError::Random)?;
        b[6] = (b[6] & 0x0F) | 0x40;
        b[8] = (b[8] & 0x3F) | 0x80;
        Ok(Uuid(b))
    }
}

impl std::fmt::Display for Uuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// A member's role in the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Holds role `n` (`0..members`).
    Active(usize),
    /// A hot spare.
    Spare,
    /// The replacement being filled for role `n` (hot replace); the role's current member
    /// still serves it.
    Replacement(usize),
    /// Held role `n` until a hot replace handed it to a new member; holds nothing now.
    Former(usize),
}

/// A hot replace in progress, as recorded in every member's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplaceRecord {
    /// Role being copied.
    pub role: usize,
    /// First stripe not yet copied (everything below is valid on the replacement).
    pub next: u64,
    /// Member UUID of the replacement.
    pub member: Uuid,
}

/// State of a role, as recorded in the member table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// In sync.
    Active,
    /// Failed or missing: its data is implied by parity.
    Failed,
    /// Being rebuilt; valid below the rebuild checkpoint.
    Rebuilding,
}

impl SlotState {
    fn to_byte(self) -> u8 {
        match self {
            SlotState::Active => 0,
            SlotState::Failed => 1,
            SlotState::Rebuilding => 2,
        }
    }

    fn from_byte(b: u8) -> Result<Self, SuperblockError> {
        match b {
            0 => Ok(SlotState::Active),
            1 => Ok(SlotState::Failed),
            2 => Ok(SlotState::Rebuilding),
            other => Err(SuperblockError::BadField {
                field: "role state",
                value: u64::from(other),
            }),
        }
    }
}

/// Decoded superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// Array identity, shared by all members.
    pub array_uuid: Uuid,
    /// This member's identity.
    pub member_uuid: Uuid,
    /// This member's role.
    pub role: Role,
    /// Number of roles.
    pub members: usize,
    /// Chunk size.
    pub chunk: ChunkSize,
    /// Block size.
    pub block: BlockSize,
    /// Start of the data area on every member, bytes.
    pub data_offset: u64,
    /// Bytes of each member's data area the array uses.
    pub member_data_bytes: u64,
    /// Update counter.
    pub events: u64,
    /// Whether writes may have been in flight (unclean stop ⇒ resync needed).
    pub dirty: bool,
    /// Write-intent bitmap location (bytes from member start).
    pub bitmap_offset: u64,
    /// Write-intent bitmap size in bytes.
    pub bitmap_bytes: u32,
    /// Stripes covered by one bitmap bit.
    pub bitmap_region_stripes: u64,
    /// Partial-parity-log location.
    pub ppl_offset: u64,
    /// Partial-parity-log size in bytes.
    pub ppl_bytes: u32,
    /// Role being rebuilt and the first stripe not yet rebuilt.
    pub rebuild: Option<(usize, u64)>,
    /// First stripe not yet resynced after creation (`None`: parity is in sync).
    pub resync_checkpoint: Option<u64>,
    /// Partial-parity-log epoch: log entries of other epochs are void.
    pub ppl_epoch: u64,
    /// Written by a build before superblock version 2: its log entries are format 1 (no
    /// array UUID) and it had no log flags. Encoding always writes the current version.
    pub legacy: bool,
    /// The partial-parity log is switched off (an administrator's choice, kept across
    /// restarts): degraded writes are not logged.
    pub ppl_off: bool,
    /// Since the epoch last changed, writes planned without the log (or under an older
    /// epoch) may still have been in flight: the log does not cover an unclean stop now.
    pub ppl_uncovered: bool,
    /// Write-hole policy "always": every write that is not a whole stripe is logged, healthy
    /// or degraded.
    pub ppl_always: bool,
    /// With `ppl_always`: the oldest log epoch whose entries are replayed (rounds planned
    /// under it may still have been writing); never above `ppl_epoch`.
    pub ppl_replay_from: u64,
    /// Started over an unclean stop no log covered (accepted), not rebuilt since: the
    /// write-intent bits set include the regions that may be torn.
    pub ppl_exposed: bool,
    /// Hot replace in progress, if any.
    pub replace: Option<ReplaceRecord>,
    /// State of every role.
    pub role_states: Vec<SlotState>,
    /// Member UUID holding every role.
    pub role_uuids: Vec<Uuid>,
}

impl Superblock {
    /// Encodes into one 4 KiB block.
    pub fn encode(&self) -> [u8; SB_BYTES] {
        let mut b = [0u8; SB_BYTES];
        b[field::MAGIC..field::MAGIC + 8].copy_from_slice(&MAGIC);
        put32(&mut b, field::VERSION, VERSION);
        b[field::ARRAY_UUID..field::ARRAY_UUID + 16].copy_from_slice(&self.array_uuid.0);
        b[field::MEMBER_UUID..field::MEMBER_UUID + 16].copy_from_slice(&self.member_uuid.0);
        let role = match self.role {
            Role::Active(r) => r as u32,
            Role::Spare => ROLE_SPARE,
            Role::Replacement(r) => ROLE_REPLACEMENT | r as u32,
            Role::Former(r) => ROLE_FORMER | r as u32,
        };
        put32(&mut b, field::ROLE, role);
        put32(&mut b, field::MEMBERS, self.members as u32);
        put32(&mut b, field::CHUNK, self.chunk.bytes());
        put32(&mut b, field::BLOCK, self.block.bytes());
        put64(&mut b, field::DATA_OFFSET, self.data_offset);
        put64(&mut b, field::MEMBER_DATA_BYTES, self.member_data_bytes);
        put64(&mut b, field::EVENTS, self.events);
        put32(&mut b, field::STATE, u32::from(self.dirty));
        put64(&mut b, field::BITMAP_OFFSET, self.bitmap_offset);
        put32(&mut b, field::BITMAP_BYTES, self.bitmap_bytes);
        put64(
            &mut b,
            field::BITMAP_REGION_STRIPES,
            self.bitmap_region_stripes,
        );
        put64(&mut b, field::PPL_OFFSET, self.ppl_offset);
        put32(&mut b, field::PPL_BYTES, self.ppl_bytes);
        let (rr, rc) = self.rebuild.map_or((NO_REBUILD, 0), |(r, c)| (r as u32, c));
        put32(&mut b, field::REBUILD_ROLE, rr);
        put64(&mut b, field::REBUILD_CHECKPOINT, rc);
        put64(
            &mut b,
            field::RESYNC_CHECKPOINT,
            self.resync_checkpoint.unwrap_or(u64::MAX),
        );
        put64(&mut b, field::PPL_EPOCH, self.ppl_epoch);
        put32(
            &mut b,
            field::PPL_FLAGS,
            (u32::from(self.ppl_off) * PPL_OFF)
                | (u32::from(self.ppl_uncovered) * PPL_UNCOVERED)
                | (u32::from(self.ppl_always) * PPL_ALWAYS)
                | (u32::from(self.ppl_exposed) * PPL_EXPOSED),
        );
        put64(&mut b, field::PPL_REPLAY_FROM, self.ppl_replay_from);
        if let Some(rep) = &self.replace {
            put32(&mut b, field::REPLACE_ROLE, rep.role as u32 + 1);
            put64(&mut b, field::REPLACE_CHECKPOINT, rep.next);
            b[field::REPLACE_UUID..field::REPLACE_UUID + 16].copy_from_slice(&rep.member.0);
        }
        for (i, s) in self.role_states.iter().take(MAX_MEMBERS).enumerate() {
            b[field::ROLE_STATES + i] = s.to_byte();
        }
        for (i, u) in self.role_uuids.iter().take(MAX_MEMBERS).enumerate() {
            let o = field::ROLE_UUIDS + 16 * i;
            b[o..o + 16].copy_from_slice(&u.0);
        }
        let crc = crc32c(&b[..field::CRC]);
        put32(&mut b, field::CRC, crc);
        b
    }

    /// Decodes and validates a superblock.
    pub fn decode(b: &[u8]) -> Result<Superblock, SuperblockError> {
        if b.len() < SB_BYTES {
            return Err(SuperblockError::Short(b.len()));
        }
        if b[field::MAGIC..field::MAGIC + 8] != MAGIC {
            return Err(SuperblockError::NoMagic);
        }
        let stored = get32(b, field::CRC);
        let computed = crc32c(&b[..field::CRC]);
        if stored != computed {
            return Err(SuperblockError::Checksum { stored, computed });
        }
        let version = get32(b, field::VERSION);
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(SuperblockError::Version(version));
        }
        let members = get32(b, field::MEMBERS) as usize;
        if !(3..=MAX_MEMBERS).contains(&members) {
            return Err(SuperblockError::BadField {
                field: "members",
                value: members as u64,
            });
        }
        let role = match get32(b, field::ROLE) {
            ROLE_SPARE => Role::Spare,
            r if (r as usize) < members => Role::Active(r as usize),
            r if r & !ROLE_REPLACEMENT < members as u32 && r & ROLE_REPLACEMENT != 0 => {
                Role::Replacement((r & !ROLE_REPLACEMENT) as usize)
            }
            r if r & !ROLE_FORMER < members as u32 && r & ROLE_FORMER != 0 => {
                Role::Former((r & !ROLE_FORMER) as usize)
            }
            r => {
                return Err(SuperblockError::BadField {
                    field: "role",
                    value: u64::from(r),
                })
            }
        };
        let chunk =
            ChunkSize::new(get32(b, field::CHUNK)).map_err(|_| SuperblockError::BadField {
                field: "chunk",
                value: u64::from(get32(b, field::CHUNK)),
            })?;
        let block =
            BlockSize::new(get32(b, field::BLOCK)).map_err(|_| SuperblockError::BadField {
                field: "block",
                value: u64::from(get32(b, field::BLOCK)),
            })?;
        let uuid = |o: usize| {
            let mut u = [0u8; 16];
            u.copy_from_slice(&b[o..o + 16]);
            Uuid(u)
        };
        let rebuild = match get32(b, field::REBUILD_ROLE) {
            NO_REBUILD => None,
            r if (r as usize) < members => Some((r as usize, get64(b, field::REBUILD_CHECKPOINT))),
            r => {
                return Err(SuperblockError::BadField {
                    field: "rebuild role",
                    value: u64::from(r),
                })
            }
        };
        let resync = get64(b, field::RESYNC_CHECKPOINT);
        let replace = match get32(b, field::REPLACE_ROLE) {
            0 => None,
            r if (r as usize) <= members => Some(ReplaceRecord {
                role: r as usize - 1,
                next: get64(b, field::REPLACE_CHECKPOINT),
                member: uuid(field::REPLACE_UUID),
            }),
            r => {
                return Err(SuperblockError::BadField {
                    field: "replace role",
                    value: u64::from(r),
                })
            }
        };
        let role_states = (0..members)
            .map(|i| SlotState::from_byte(b[field::ROLE_STATES + i]))
            .collect::<Result<Vec<_>, _>>()?;
        // Metadata areas must lie before the data area, everything 4 KiB aligned and
        // addressable; a superblock that says otherwise is refused here, not trusted later.
        let data_offset = get64(b, field::DATA_OFFSET);
        let bad = |field, value| Err(SuperblockError::BadField { field, value });
        if !data_offset.is_multiple_of(4096) || data_offset < SB_BYTES as u64 {
            return bad("data offset", data_offset);
        }
        if data_offset
            .checked_add(get64(b, field::MEMBER_DATA_BYTES))
            .is_none()
        {
            return bad("member data bytes", get64(b, field::MEMBER_DATA_BYTES));
        }
        let within = |off: u64, len: u64| {
            off.is_multiple_of(4096)
                && off >= SB_BYTES as u64
                && off.checked_add(len).is_some_and(|e| e <= data_offset)
        };
        if !within(
            get64(b, field::BITMAP_OFFSET),
            u64::from(get32(b, field::BITMAP_BYTES)),
        ) {
            return bad("bitmap location", get64(b, field::BITMAP_OFFSET));
        }
        if !within(
            get64(b, field::PPL_OFFSET),
            u64::from(get32(b, field::PPL_BYTES)),
        ) {
            return bad("log location", get64(b, field::PPL_OFFSET));
        }
        if get64(b, field::BITMAP_REGION_STRIPES) == 0 {
            return bad("bitmap region", 0);
        }
        let state = get32(b, field::STATE);
        if state > 1 {
            return Err(SuperblockError::BadField {
                field: "state",
                value: u64::from(state),
            });
        }
        Ok(Superblock {
            array_uuid: uuid(field::ARRAY_UUID),
            member_uuid: uuid(field::MEMBER_UUID),
            role,
            members,
            chunk,
            block,
            data_offset: get64(b, field::DATA_OFFSET),
            member_data_bytes: get64(b, field::MEMBER_DATA_BYTES),
            events: get64(b, field::EVENTS),
            dirty: state == 1,
            bitmap_offset: get64(b, field::BITMAP_OFFSET),
            bitmap_bytes: get32(b, field::BITMAP_BYTES),
            bitmap_region_stripes: get64(b, field::BITMAP_REGION_STRIPES),
            ppl_offset: get64(b, field::PPL_OFFSET),
            ppl_bytes: get32(b, field::PPL_BYTES),
            rebuild,
            resync_checkpoint: (resync != u64::MAX).then_some(resync),
            ppl_epoch: get64(b, field::PPL_EPOCH),
            legacy: version < VERSION,
            ppl_off: get32(b, field::PPL_FLAGS) & PPL_OFF != 0,
            ppl_uncovered: get32(b, field::PPL_FLAGS) & PPL_UNCOVERED != 0,
            ppl_always: get32(b, field::PPL_FLAGS) & PPL_ALWAYS != 0,
            ppl_exposed: get32(b, field::PPL_FLAGS) & PPL_EXPOSED != 0,
            ppl_replay_from: if get32(b, field::PPL_FLAGS) & PPL_ALWAYS != 0 {
                get64(b, field::PPL_REPLAY_FROM).min(get64(b, field::PPL_EPOCH))
            } else {
                get64(b, field::PPL_EPOCH)
            },
            replace,
            role_states,
            role_uuids: (0..members)
                .map(|i| uuid(field::ROLE_UUIDS + 16 * i))
                .collect(),
        })
    }
}

fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

fn get32(b: &[u8], o: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[o..o + 4]);
    u32::from_le_bytes(x)
}

fn get64(b: &[u8], o: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(x)
}

/// CRC-32C (Castagnoli; reflected, init and final XOR `0xFFFF_FFFF`), the `crc32c` crate's.
pub use crc32c::crc32c;

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Superblock {
        Superblock {
            array_uuid: Uuid([7; 16]),
            member_uuid: Uuid([9; 16]),
            role: Role::Active(2),
            members: 4,
            chunk: ChunkSize::DEFAULT,
            block: BlockSize::B4096,
            data_offset: DEFAULT_DATA_OFFSET,
            member_data_bytes: 1 << 30,
            events: 42,
            dirty: true,
            bitmap_offset: 4096,
            bitmap_bytes: 4096,
            bitmap_region_stripes: 16,
            ppl_offset: 65536,
            ppl_bytes: 65536,
            rebuild: Some((1, 77)),
            resync_checkpoint: None,
            ppl_epoch: 5,
            legacy: false,
            ppl_off: false,
            ppl_uncovered: true,
            ppl_always: true,
            ppl_replay_from: 4,
            ppl_exposed: true,
            replace: Some(ReplaceRecord {
                role: 3,
                next: 1234,
                member: Uuid([5; 16]),
            }),
            role_states: vec![
                SlotState::Active,
                SlotState::Rebuilding,
                SlotState::Active,
                SlotState::Failed,
            ],
            role_uuids: (0..4).map(|i| Uuid([i; 16])).collect(),
        }
    }

    #[test]
    fn crc32c_known_vector() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn version_1_reads_as_legacy_and_later_versions_are_refused() {
        let mut b = sample().encode();
        assert!(!Superblock::decode(&b).unwrap().legacy);
        for (version, ok) in [(1, true), (3, false), (0, false)] {
            put32(&mut b, field::VERSION, version);
            let crc = crc32c(&b[..field::CRC]);
            put32(&mut b, field::CRC, crc);
            match Superblock::decode(&b) {
                Ok(sb) => assert!(ok && sb.legacy),
                Err(e) => assert!(!ok && matches!(e, SuperblockError::Version(v) if v == version)),
            }
        }
    }

    #[test]
    fn round_trip() {
        let sb = sample();
        assert_eq!(Superblock::decode(&sb.encode()).unwrap(), sb);
        // Policy "degraded": the replay start is the current epoch whatever the field says
        // (older builds leave it zero).
        let degraded = Superblock {
            ppl_always: false,
            ppl_replay_from: 5,
            ..sample()
        };
        let mut raw = degraded.encode();
        put64(&mut raw, field::PPL_REPLAY_FROM, 0);
        let crc = crc32c(&raw[..field::CRC]);
        put32(&mut raw, field::CRC, crc);
        assert_eq!(Superblock::decode(&raw).unwrap(), degraded);
        let spare = Superblock {
            role: Role::Spare,
            rebuild: None,
            resync_checkpoint: Some(3),
            ..sample()
        };
        assert_eq!(Superblock::decode(&spare.encode()).unwrap(), spare);
        for role in [Role::Replacement(3), Role::Former(0), Role::Active(3)] {
            let sb = Superblock {
                role,
                replace: None,
                ..sample()
            };
            assert_eq!(Superblock::decode(&sb.encode()).unwrap(), sb);
        }
    }

    #[test]
    fn superblocks_from_before_hot_replace_read_as_no_copy_running() {
        let mut b = Superblock {
            replace: None,
            ..sample()
        }
        .encode();
        assert!(b[field::REPLACE_ROLE..field::REPLACE_UUID + 16]
            .iter()
            .all(|&x| x == 0));
        assert_eq!(Superblock::decode(&b).unwrap().replace, None);
        // A replacement of a role the array does not have is refused.
        put32(&mut b, field::REPLACE_ROLE, 5 + 1);
        let crc = crc32c(&b[..field::CRC]);
        put32(&mut b, field::CRC, crc);
        assert!(matches!(
            Superblock::decode(&b),
            Err(SuperblockError::BadField {
                field: "replace role",
                ..
            })
        ));
    }

    #[test]
    fn corruption_is_detected_and_never_panics() {
        let good = sample().encode();
        assert!(matches!(
            Superblock::decode(&good[..100]),
            Err(SuperblockError::Short(100))
        ));
        assert!(matches!(
            Superblock::decode(&[0u8; SB_BYTES]),
            Err(SuperblockError::NoMagic)
        ));
        let mut b = good;
        put64(&mut b, field::BITMAP_OFFSET, DEFAULT_DATA_OFFSET);
        let crc = crc32c(&b[..field::CRC]);
        put32(&mut b, field::CRC, crc);
        assert!(matches!(
            Superblock::decode(&b),
            Err(SuperblockError::BadField {
                field: "bitmap location",
                ..
            })
        ));
        for i in (8..SB_BYTES).step_by(97) {
            let mut b = good;
            b[i] ^= 0x40;
            assert!(Superblock::decode(&b).is_err(), "flip at {i} not caught");
        }
        // A valid CRC over nonsense fields is still rejected field by field.
        let mut b = good;
        put32(&mut b, field::MEMBERS, 1000);
        let crc = crc32c(&b[..field::CRC]);
        put32(&mut b, field::CRC, crc);
        assert!(matches!(
            Superblock::decode(&b),
            Err(SuperblockError::BadField {
                field: "members",
                ..
            })
        ));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Any bytes with a valid magic and CRC decode to a superblock or an error; never a
        /// panic, and what decodes re-encodes to the same fields.
        #[test]
        fn decode_is_total(mut raw in proptest::collection::vec(proptest::prelude::any::<u8>(), SB_BYTES)) {
            raw[..8].copy_from_slice(&MAGIC);
            put32(&mut raw, field::VERSION, VERSION);
            // Mostly plausible fields, so that decoding often succeeds and the round trip runs.
            let members = 3 + u32::from(raw[field::MEMBERS]) % 62;
            if raw[1000] % 4 != 0 {
                put32(&mut raw, field::MEMBERS, members);
                let chunk = 4096 << (raw[field::CHUNK] % 12);
                let block = if raw[field::BLOCK] % 2 == 0 { 512 } else { 4096 };
                let state = u32::from(raw[field::STATE] % 2);
                put32(&mut raw, field::CHUNK, chunk);
                put32(&mut raw, field::BLOCK, block);
                put32(&mut raw, field::STATE, state);
                let role = u32::from(raw[field::ROLE]) % (members + 1);
                put32(&mut raw, field::ROLE, if role == members { ROLE_SPARE } else { role });
                let rr = u32::from(raw[field::REBUILD_ROLE]) % (members + 1);
                put32(&mut raw, field::REBUILD_ROLE, if rr == members { NO_REBUILD } else { rr });
                let rep = u32::from(raw[field::REPLACE_ROLE]) % (members + 1);
                put32(&mut raw, field::REPLACE_ROLE, rep);
                for i in 0..members as usize {
                    raw[field::ROLE_STATES + i] %= 3;
                }
                put64(&mut raw, field::DATA_OFFSET, DEFAULT_DATA_OFFSET);
                let mdb = u64::from(raw[field::MEMBER_DATA_BYTES]) << 20;
                put64(&mut raw, field::MEMBER_DATA_BYTES, mdb);
                put64(&mut raw, field::BITMAP_OFFSET, 4096);
                put32(&mut raw, field::BITMAP_BYTES, 4096);
                let region = 1 + u64::from(raw[field::BITMAP_REGION_STRIPES]);
                put64(&mut raw, field::BITMAP_REGION_STRIPES, region);
                put64(&mut raw, field::PPL_OFFSET, 65536);
                put32(&mut raw, field::PPL_BYTES, 65536);
            }
            let crc = crc32c(&raw[..field::CRC]);
            put32(&mut raw, field::CRC, crc);
            if let Ok(sb) = Superblock::decode(&raw) {
                proptest::prop_assert_eq!(Superblock::decode(&sb.encode()).ok(), Some(sb));
            } else {
                proptest::prop_assert!(raw[1000] % 4 == 0, "plausible fields must decode");
            }
        }
    }

    #[test]
    fn random_uuids_differ_and_print() {
        let a = Uuid::random().unwrap();
        let b = Uuid::random().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.to_string().len(), 36);
    }
}
