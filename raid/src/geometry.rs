//! Array geometry and the left-symmetric RAID-5 layout (md's default, `ALGORITHM_LEFT_SYMMETRIC`).
//!
//! Invariants, checked once in [`Geometry::new`] and relied on everywhere else:
//! - `members >= 3`; block size is 512 or 4096 bytes; chunk size is a power of two, at least
//!   4 KiB and at least one block, at most 16 MiB;
//! - every member's data area holds `stripes()` whole chunks (the smallest member's data area,
//!   rounded down to a chunk), so capacity is `(members - 1) * stripes * chunk`.
//!
//! Layout (md `raid5_compute_sector`, level 5, left-symmetric): stripe `s` keeps parity on
//! member `p = (N - 1) - (s mod N)`, and data chunk `d` (0-based within the stripe) on member
//! `(p + 1 + d) mod N`. Data chunks of consecutive stripes follow each other in the array's
//! logical address space; member offset of stripe `s` is `s * chunk`.

use crate::error::GeometryError;

/// Logical block size of the array and its members, in bytes: 512 or 4096.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockSize(u32);

impl BlockSize {
    /// 4096-byte blocks (the default, and what O_DIRECT on NVMe wants).
    pub const B4096: BlockSize = BlockSize(4096);
    /// 512-byte blocks.
    pub const B512: BlockSize = BlockSize(512);

    /// Validates a block size in bytes.
    pub fn new(bytes: u32) -> Result<Self, GeometryError> {
        match bytes {
            512 | 4096 => Ok(BlockSize(bytes)),
            _ => Err(GeometryError::BlockSize(bytes)),
        }
    }

    /// Bytes per block.
    pub fn bytes(self) -> u32 {
        self.0
    }
}

/// Chunk (strip) size in bytes: a power of two between 4 KiB and 16 MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkSize(u32);

impl ChunkSize {
    /// 64 KiB, md's and SPDK's usual default.
    pub const DEFAULT: ChunkSize = ChunkSize(64 * 1024);
    /// Largest accepted chunk.
    pub const MAX: u32 = 16 << 20;

    /// Validates a chunk size in bytes.
    pub fn new(bytes: u32) -> Result<Self, GeometryError> {
        if !(4096..=Self::MAX).contains(&bytes) || !bytes.is_power_of_two() {
            return Err(GeometryError::ChunkSize(bytes));
        }
        Ok(ChunkSize(bytes))
    }

    /// Bytes per chunk.
    pub fn bytes(self) -> u32 {
        self.0
    }
}

/// Index of a member (its role) in the array, `0..members`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberIdx(pub usize);

/// Index of a stripe (one chunk on every member), `0..stripes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StripeIdx(pub u64);

/// Logical block address on the array (units of the array's block size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArrayBlock(pub u64);

/// Block address inside a member's data area (units of the block size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberBlock(pub u64);

/// Validated RAID-5 geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    members: usize,
    chunk: ChunkSize,
    block: BlockSize,
    stripes: u64,
}

/// Where one logical block lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Stripe holding the block.
    pub stripe: StripeIdx,
    /// Data chunk index within the stripe, `0..members-1`.
    pub data_index: usize,
    /// Member holding the block.
    pub member: MemberIdx,
    /// Block offset inside that member's data area.
    pub member_block: MemberBlock,
    /// Block offset inside the chunk.
    pub offset_in_chunk: u64,
}

/// A run of logical blocks that lies inside one chunk: the unit of member I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Location of the run's first block.
    pub at: Location,
    /// Number of blocks in the run.
    pub blocks: u64,
    /// Offset of the run from the start of the request, in blocks.
    pub request_offset: u64,
}

impl Geometry {
    /// Builds a geometry for `members` members whose smallest data area is
    /// `smallest_member_data_bytes` bytes.
    pub fn new(
        members: usize,
        chunk: ChunkSize,
        block: BlockSize,
        smallest_member_data_bytes: u64,
    ) -> Result<Self, GeometryError> {
        if members < 3 {
            return Err(GeometryError::TooFewMembers(members));
        }
        if members > crate::MAX_MEMBERS {
            return Err(GeometryError::TooManyMembers(members));
        }
        if chunk.bytes() < block.bytes() {
            return Err(GeometryError::ChunkSmallerThanBlock {
                chunk: chunk.bytes(),
                block: block.bytes(),
            });
        }
        let stripes = smallest_member_data_bytes / u64::from(chunk.bytes());
        if stripes == 0 {
            return Err(GeometryError::MemberTooSmall {
                bytes: smallest_member_data_bytes,
                chunk: chunk.bytes(),
            });
        }
        // Capacity in bytes must fit in u64 (a corrupt superblock could claim more).
        let fits = stripes
            .checked_mul((members as u64 - 1) * u64::from(chunk.bytes()))
            .is_some();
        if !fits {
            return Err(GeometryError::TooLarge(smallest_member_data_bytes));
        }
        Ok(Geometry {
            members,
            chunk,
            block,
            stripes,
        })
    }

    /// Number of members (data + parity).
    pub fn members(&self) -> usize {
        self.members
    }

    /// Number of data chunks per stripe.
    pub fn data_members(&self) -> usize {
        self.members - 1
    }

    /// Chunk size.
    pub fn chunk(&self) -> ChunkSize {
        self.chunk
    }

    /// Block size.
    pub fn block(&self) -> BlockSize {
        self.block
    }

    /// Bytes per block.
    pub fn block_bytes(&self) -> usize {
        self.block.bytes() as usize
    }

    /// Bytes per chunk.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk.bytes() as usize
    }

    /// Blocks per chunk.
    pub fn chunk_blocks(&self) -> u64 {
        u64::from(self.chunk.bytes() / self.block.bytes())
    }

    /// Number of stripes.
    pub fn stripes(&self) -> u64 {
        self.stripes
    }

    /// Blocks of data per stripe (`(N - 1) * chunk_blocks`).
    pub fn stripe_data_blocks(&self) -> u64 {
        self.data_members() as u64 * self.chunk_blocks()
    }

    /// Bytes of each member's data area that the array uses.
    pub fn member_data_bytes(&self) -> u64 {
        self.stripes * u64::from(self.chunk.bytes())
    }

    /// Array capacity in blocks.
    pub fn capacity_blocks(&self) -> u64 {
        self.stripes * self.stripe_data_blocks()
    }

    /// Array capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_blocks() * u64::from(self.block.bytes())
    }

    /// Member holding the parity chunk of `stripe`.
    pub fn parity_member(&self, stripe: StripeIdx) -> MemberIdx {
        let n = self.members as u64;
        MemberIdx((n - 1 - stripe.0 % n) as usize)
    }

    /// Member holding data chunk `data_index` of `stripe`. `data_index < members - 1`.
    pub fn data_member(&self, stripe: StripeIdx, data_index: usize) -> MemberIdx {
        let p = self.parity_member(stripe).0;
        MemberIdx((p + 1 + data_index) % self.members)
    }

    /// Data chunk index that `member` holds in `stripe`, or `None` when it holds the parity.
    pub fn data_index_of(&self, stripe: StripeIdx, member: MemberIdx) -> Option<usize> {
        let p = self.parity_member(stripe).0;
        if member.0 == p || member.0 >= self.members {
            return None;
        }
        Some((member.0 + self.members - p - 1) % self.members)
    }

    /// First block of `stripe` in every member's data area.
    pub fn stripe_member_block(&self, stripe: StripeIdx) -> MemberBlock {
        MemberBlock(stripe.0 * self.chunk_blocks())
    }

    /// Locates a logical block. `None` when it is past the capacity.
    pub fn locate(&self, block: ArrayBlock) -> Option<Location> {
        if block.0 >= self.capacity_blocks() {
            return None;
        }
        let cb = self.chunk_blocks();
        let chunk_number = block.0 / cb;
        let offset_in_chunk = block.0 % cb;
        let dm = self.data_members() as u64;
        let stripe = StripeIdx(chunk_number / dm);
        let data_index = (chunk_number % dm) as usize;
        Some(Location {
            stripe,
            data_index,
            member: self.data_member(stripe, data_index),
            member_block: MemberBlock(stripe.0 * cb + offset_in_chunk),
            offset_in_chunk,
        })
    }

    /// Logical block stored at data chunk `data_index`, block `offset_in_chunk` of `stripe`.
    pub fn logical_block(
        &self,
        stripe: StripeIdx,
        data_index: usize,
        offset_in_chunk: u64,
    ) -> ArrayBlock {
        ArrayBlock(
            (stripe.0 * self.data_members() as u64 + data_index as u64) * self.chunk_blocks()
                + offset_in_chunk,
        )
    }

    /// Splits `[start, start + blocks)` into per-chunk runs, in logical order.
    /// Fails when the range is empty or runs past the capacity.
    pub fn segments(
        &self,
        start: ArrayBlock,
        blocks: u64,
    ) -> Result<impl Iterator<Item = Segment> + '_, GeometryError> {
        let end = start
            .0
            .checked_add(blocks)
            .filter(|&e| blocks > 0 && e <= self.capacity_blocks())
            .ok_or(GeometryError::OutOfRange {
                start: start.0,
                blocks,
                capacity: self.capacity_blocks(),
            })?;
        let cb = self.chunk_blocks();
        let mut next = start.0;
        Ok(std::iter::from_fn(move || {
            if next >= end {
                return None;
            }
            let at = self.locate(ArrayBlock(next))?;
            let run = (cb - at.offset_in_chunk).min(end - next);
            let seg = Segment {
                at,
                blocks: run,
                request_offset: next - start.0,
            };
            next += run;
            Some(seg)
        }))
    }
}

#[cfg(test)]
mod tests;
