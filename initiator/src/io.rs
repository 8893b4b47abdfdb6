//! NVM I/O on one queue: building Read, Write, Flush, Write Zeroes and Dataset Management
//! submissions on a slot, and synchronous, pipelined helpers that move a whole buffer through
//! as many slots as the queue allows.
//!
//! Transfers: reads and large writes use a keyed SGL over the slot's registered buffer (the
//! controller RDMA WRITEs / RDMA READs it); a write that fits the controller's in-capsule size
//! travels inside the command capsule (decided by [`Queue::submit`]).
//!
//! Invariants: a request never exceeds the slot size (the slot is cut to MDTS at connect) nor
//! 65536 blocks; LBA ranges are checked against the namespace before anything is sent; the
//! `service` hook (keep-alive) runs at least every few milliseconds while a helper waits.

use std::time::{Duration, Instant};

use raidline_fabric::Fabric;
use raidline_proto::io::{DatasetManagement, DsmRange, IoCommand, ReadWrite, WriteZeroes};
use raidline_proto::SglDescriptor;

use crate::controller::Namespace;
use crate::error::Error;
use crate::queue::{backoff, Queue, Xfer};
use crate::types::{Lba, Nsid, Tag};

/// What an I/O request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOp {
    /// Read `nlb` blocks into the slot.
    Read,
    /// Write `nlb` blocks from the slot.
    Write,
}

fn placeholder() -> SglDescriptor {
    SglDescriptor::Keyed {
        address: 0,
        length: 0,
        key: 0,
        invalidate: false,
    }
}

fn check_range(ns: &Namespace, slba: Lba, nlb: u32) -> Result<(), Error> {
    if nlb == 0 || nlb > 0x1_0000 {
        return Err(Error::InvalidArgument(format!(
            "{nlb} blocks (1–65536 per command)"
        )));
    }
    match slba.0.checked_add(u64::from(nlb)) {
        Some(end) if end <= ns.blocks => Ok(()),
        _ => Err(Error::InvalidArgument(format!(
            "LBA {slba}+{nlb} beyond namespace {} of {} blocks",
            ns.nsid, ns.blocks
        ))),
    }
}

/// Submits a Read or Write of `nlb` blocks at `slba` on the reserved slot `tag` (for a write,
/// the data must already be in the slot).
pub fn submit_rw<F: Fabric>(
    q: &mut Queue<F>,
    tag: Tag,
    op: IoOp,
    ns: &Namespace,
    slba: Lba,
    nlb: u32,
) -> Result<(), Error> {
    check_range(ns, slba, nlb)?;
    let len = u64::from(nlb) * u64::from(ns.block_size);
    let len = u32::try_from(len)
        .ok()
        .filter(|&l| l <= q.data_slot())
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{nlb} blocks of {} bytes exceed the {}-byte transfer limit",
                ns.block_size,
                q.data_slot()
            ))
        })?;
    let rw = ReadWrite {
        cid: 0,
        nsid: ns.nsid.0,
        sgl: placeholder(),
        slba: slba.0,
        nlb,
        fua: false,
        limited_retry: false,
        prinfo: 0,
        dtype: 0,
        dsm: 0,
        dspec: 0,
        reftag: 0,
        apptag: 0,
    };
    let (cmd, xfer, name) = match op {
        IoOp::Read => (IoCommand::Read(rw), Xfer::ToHost(len), "Read"),
        IoOp::Write => (IoCommand::Write(rw), Xfer::FromHost(len), "Write"),
    };
    q.submit(tag, cmd.to_sqe()?, xfer, name, true)
}

/// Submits a Flush of `nsid` on the reserved slot `tag`.
pub fn submit_flush<F: Fabric>(q: &mut Queue<F>, tag: Tag, nsid: Nsid) -> Result<(), Error> {
    let sqe = IoCommand::Flush {
        cid: 0,
        nsid: nsid.0,
    }
    .to_sqe()?;
    q.submit(tag, sqe, Xfer::None, "Flush", true)
}

/// Submits a Write Zeroes on the reserved slot `tag`.
pub fn submit_write_zeroes<F: Fabric>(
    q: &mut Queue<F>,
    tag: Tag,
    ns: &Namespace,
    slba: Lba,
    nlb: u32,
    deallocate: bool,
) -> Result<(), Error> {
    check_range(ns, slba, nlb)?;
    let sqe = IoCommand::WriteZeroes(WriteZeroes {
        cid: 0,
        nsid: ns.nsid.0,
        slba: slba.0,
        nlb,
        deallocate,
        fua: false,
        limited_retry: false,
        prinfo: 0,
    })
    .to_sqe()?;
    q.submit(tag, sqe, Xfer::None, "Write Zeroes", true)
}

/// Submits a Dataset Management with `ranges` (1–256; written into the slot) on `tag`.
pub fn submit_dsm<F: Fabric>(
    q: &mut Queue<F>,
    tag: Tag,
    nsid: Nsid,
    ranges: &[DsmRange],
    deallocate: bool,
) -> Result<(), Error> {
    let n = u16::try_from(ranges.len())
        .ok()
        .filter(|&n| (1..=256).contains(&n))
        .ok_or_else(|| Error::InvalidArgument(format!("{} DSM ranges (1–256)", ranges.len())))?;
    let bytes = DsmRange::list_to_bytes(ranges);
    q.write_data(tag, 0, &bytes)?;
    let sqe = IoCommand::DatasetManagement(DatasetManagement {
        cid: 0,
        nsid: nsid.0,
        sgl: placeholder(),
        ranges: n,
        idr: false,
        idw: false,
        deallocate,
    })
    .to_sqe()?;
    q.submit(
        tag,
        sqe,
        Xfer::FromHost(bytes.len() as u32),
        "Dataset Management",
        true,
    )
}

/// Called while a helper waits, at most every [`SERVICE_EVERY`]: the controller's keep-alive.
pub type ServiceHook<'a> = &'a mut dyn FnMut() -> Result<(), Error>;

/// How often a waiting helper calls its service hook.
pub const SERVICE_EVERY: Duration = Duration::from_millis(5);

struct Pump<'a> {
    service: ServiceHook<'a>,
    last: Instant,
    idle: u32,
}

impl Pump<'_> {
    fn tick<F: Fabric>(&mut self, q: &mut Queue<F>, done: &mut Vec<Tag>) -> Result<(), Error> {
        if q.poll(done) == 0 {
            self.idle += 1;
            backoff(self.idle);
        } else {
            self.idle = 0;
        }
        if self.last.elapsed() >= SERVICE_EVERY {
            self.last = Instant::now();
            (self.service)()?;
        }
        Ok(())
    }
}

/// Reads or writes `buf` (a whole number of blocks) starting at `slba`, split into slot-sized
/// commands kept in flight together. On the first failure, waits for the rest and returns it.
pub fn transfer<F: Fabric>(
    q: &mut Queue<F>,
    op: IoOp,
    ns: &Namespace,
    slba: Lba,
    buf: &mut [u8],
    service: ServiceHook<'_>,
) -> Result<(), Error> {
    match op {
        IoOp::Read => pipeline(q, ns, slba, Data::Read(buf), service),
        IoOp::Write => pipeline(q, ns, slba, Data::Write(buf), service),
    }
}

/// Reads `buf.len()` bytes (whole blocks) from `slba` into `buf` (see [`transfer`]).
pub fn read<F: Fabric>(
    q: &mut Queue<F>,
    ns: &Namespace,
    slba: Lba,
    buf: &mut [u8],
    service: ServiceHook<'_>,
) -> Result<(), Error> {
    pipeline(q, ns, slba, Data::Read(buf), service)
}

/// Writes `data` (whole blocks) at `slba` (see [`transfer`]).
pub fn write<F: Fabric>(
    q: &mut Queue<F>,
    ns: &Namespace,
    slba: Lba,
    data: &[u8],
    service: ServiceHook<'_>,
) -> Result<(), Error> {
    pipeline(q, ns, slba, Data::Write(data), service)
}

enum Data<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

impl Data<'_> {
    fn len(&self) -> usize {
        match self {
            Data::Read(b) => b.len(),
            Data::Write(b) => b.len(),
        }
    }
    fn op(&self) -> IoOp {
        match self {
            Data::Read(_) => IoOp::Read,
            Data::Write(_) => IoOp::Write,
        }
    }
}

fn pipeline<F: Fabric>(
    q: &mut Queue<F>,
    ns: &Namespace,
    slba: Lba,
    mut buf: Data<'_>,
    service: ServiceHook<'_>,
) -> Result<(), Error> {
    let op = buf.op();
    let bs = ns.block_size as usize;
    if buf.len() % bs != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} bytes is not a whole number of {bs}-byte blocks",
            buf.len()
        )));
    }
    let blocks = (buf.len() / bs) as u64;
    check_range(ns, slba, 1).and_then(|()| {
        if slba.0 + blocks > ns.blocks {
            Err(Error::InvalidArgument(format!(
                "LBA {slba}+{blocks} beyond namespace {} of {} blocks",
                ns.nsid, ns.blocks
            )))
        } else {
            Ok(())
        }
    })?;
    let per_cmd = (q.data_slot() as usize / bs).clamp(1, 0x1_0000);
    if per_cmd * bs > q.data_slot() as usize {
        return Err(Error::InvalidArgument(format!(
            "block size {bs} exceeds the {}-byte transfer limit",
            q.data_slot()
        )));
    }
    let chunk = per_cmd * bs;
    let chunks = buf.len().div_ceil(chunk);
    let mut owner: Vec<Option<usize>> = vec![None; usize::from(q.depth())];
    let mut next = 0usize;
    let mut finished = 0usize;
    let mut first_err: Option<Error> = None;
    let mut done = Vec::new();
    let mut pump = Pump {
        service,
        last: Instant::now(),
        idle: 0,
    };
    while finished < chunks {
        while first_err.is_none() && next < chunks {
            let Some(tag) = q.alloc() else { break };
            let lo = next * chunk;
            let hi = (lo + chunk).min(buf.len());
            let nlb = ((hi - lo) / bs) as u32;
            let lba = Lba(slba.0 + (lo / bs) as u64);
            let r = match &buf {
                Data::Write(b) => q.write_data(tag, 0, &b[lo..hi]),
                Data::Read(_) => Ok(()),
            }
            .and_then(|()| submit_rw(q, tag, op, ns, lba, nlb));
            if let Err(e) = r {
                q.release(tag);
                first_err = Some(e);
                break;
            }
            owner[tag.index()] = Some(next);
            next += 1;
        }
        if first_err.is_some() && q.in_flight() == 0 {
            break;
        }
        done.clear();
        pump.tick(q, &mut done)?;
        for &tag in &done {
            let Some(i) = owner[tag.index()] else {
                continue;
            };
            let Some(f) = q.take(tag) else { continue };
            owner[tag.index()] = None;
            finished += 1;
            match f.result {
                Ok(_) => {
                    if let Data::Read(b) = &mut buf {
                        let lo = i * chunk;
                        let hi = (lo + chunk).min(b.len());
                        // Read back before the slot can be reused: this thread is its only user.
                        q.read_data(tag, 0, &mut b[lo..hi])?;
                    }
                }
                Err(e) => {
                    if first_err.is_none() {
                        first_err = Some(e);
                    }
                }
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Runs one data-less command built by `submit` on a fresh slot and waits for it.
pub fn run_one<F: Fabric>(
    q: &mut Queue<F>,
    service: ServiceHook<'_>,
    submit: impl FnOnce(&mut Queue<F>, Tag) -> Result<(), Error>,
) -> Result<raidline_proto::Cqe, Error> {
    let mut pump = Pump {
        service,
        last: Instant::now(),
        idle: 0,
    };
    let mut done = Vec::new();
    let tag = loop {
        if let Some(t) = q.alloc() {
            break t;
        }
        if let Some(cause) = q.down_reason() {
            return Err(Error::QueueDown {
                qid: q.qid(),
                cause: cause.to_string(),
            });
        }
        done.clear();
        pump.tick(q, &mut done)?;
    };
    if let Err(e) = submit(q, tag) {
        q.release(tag);
        return Err(e);
    }
    loop {
        if let Some(f) = q.take(tag) {
            return f.result;
        }
        done.clear();
        pump.tick(q, &mut done)?;
    }
}
