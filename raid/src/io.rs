//! Member operations and the executors that run them.
//!
//! The array core is synchronous: it plans a phase of member operations (all reads of a
//! request, then all writes), hands the whole batch to an [`Executor`], and continues when
//! every operation has a result. An executor belongs to one thread (a target poller owns one
//! io_uring); the array itself is shared. [`SyncExecutor`] runs operations one by one through
//! [`Member::read_at`]/[`Member::write_at`]; [`crate::UringExecutor`] submits a batch across
//! all members in one `io_uring_enter` and waits for it.
//!
//! Invariant: when `execute` returns, no operation of the batch is still in flight, so the
//! borrowed buffers are free again.

use crate::error::MemberError;
use crate::geometry::MemberIdx;
use crate::member::Member;

/// The buffer of one member operation. Reads fill it; writes send it.
#[derive(Debug)]
pub enum OpBuf<'a> {
    /// Read into this buffer.
    Read(&'a mut [u8]),
    /// Write this buffer.
    Write(&'a [u8]),
}

impl OpBuf<'_> {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            OpBuf::Read(b) => b.len(),
            OpBuf::Write(b) => b.len(),
        }
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this is a write.
    pub fn is_write(&self) -> bool {
        matches!(self, OpBuf::Write(_))
    }
}

/// One operation on one member.
#[derive(Debug)]
pub struct MemberOp<'a> {
    /// The member's role in the array (for error reporting).
    pub role: MemberIdx,
    /// The member.
    pub member: &'a dyn Member,
    /// Byte offset on the member.
    pub offset: u64,
    /// Buffer.
    pub buf: OpBuf<'a>,
    /// Set by the executor.
    pub result: Option<Result<(), MemberError>>,
}

impl<'a> MemberOp<'a> {
    /// A read of `buf.len()` bytes at `offset`.
    pub fn read(role: MemberIdx, member: &'a dyn Member, offset: u64, buf: &'a mut [u8]) -> Self {
        MemberOp {
            role,
            member,
            offset,
            buf: OpBuf::Read(buf),
            result: None,
        }
    }

    /// A write of `buf` at `offset`.
    pub fn write(role: MemberIdx, member: &'a dyn Member, offset: u64, buf: &'a [u8]) -> Self {
        MemberOp {
            role,
            member,
            offset,
            buf: OpBuf::Write(buf),
            result: None,
        }
    }

    /// Runs the operation through the member's synchronous methods.
    pub fn run_sync(&mut self) {
        let r = match &mut self.buf {
            OpBuf::Read(b) => self.member.read_at(self.offset, b),
            OpBuf::Write(b) => self.member.write_at(self.offset, b),
        };
        self.result = Some(r);
    }
}

/// Runs batches of member operations.
pub trait Executor {
    /// Runs every operation and sets its `result`. Returns only when none is in flight.
    fn execute(&mut self, ops: &mut [MemberOp<'_>]);

    /// Runs `first` and, while it is in flight where the executor can overlap them, the CPU
    /// work in `then`, whose returned operations join the batch (the array submits data
    /// writes, then computes parity while they run). Returns `then`'s operations with their
    /// results; returns only when nothing is in flight. The default runs `first`, then
    /// `then`, then its operations.
    fn execute_then<'a>(
        &mut self,
        first: &mut [MemberOp<'a>],
        then: &mut dyn FnMut() -> Vec<MemberOp<'a>>,
    ) -> Vec<MemberOp<'a>> {
        self.execute(first);
        let mut more = then();
        self.execute(&mut more);
        more
    }
}

/// Runs operations one after another on the calling thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct SyncExecutor;

impl Executor for SyncExecutor {
    fn execute(&mut self, ops: &mut [MemberOp<'_>]) {
        for op in ops {
            op.run_sync();
        }
    }
}
