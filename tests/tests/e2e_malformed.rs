//! End-to-end: every class of malformed capsule is answered with its exact status (and DNR
//! where a retry cannot help), the SQ head in each response counts every capsule, and the
//! queue keeps working afterwards (a normal read returns the data written before).
//!
//! The I/O queue here is a [`RawQueue`]: SQEs go out byte for byte as built, which the
//! initiator's own queue cannot do (it always writes the SGL itself).

mod common;

use std::time::Duration;

use common::*;
use raidline_fabric::mem::MemFabric;
use raidline_initiator::controller::fabrics_connect;
use raidline_initiator::{Controller, Error, Xfer};
use raidline_proto::fabrics::{
    Connect, ConnectData, ConnectResponse, Disconnect, InvalidParameterIn, PropertyGet,
    PropertySize,
};
use raidline_proto::features::{FeatureId, NumberOfQueues};
use raidline_proto::io::{DatasetManagement, DsmRange, IoCommand, ReadWrite, WriteZeroes};
use raidline_proto::rdma_cm::CmRejectStatus;
use raidline_proto::sgl::SglSubtype;
use raidline_proto::sqe::Psdt;
use raidline_proto::text::Nqn;
use raidline_proto::{Cqe, SglDescriptor, Sqe, Status, StatusCode};

const BS: usize = 4096;
/// Where the reference data lives.
const REF_LBA: u64 = 10;
const REF_BLOCKS: u32 = 2;

fn rw(write: bool, nsid: u32, slba: u64, nlb: u32, sgl: SglDescriptor) -> Sqe {
    let rw = ReadWrite {
        cid: 0,
        nsid,
        sgl,
        slba,
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
    let cmd = if write {
        IoCommand::Write(rw)
    } else {
        IoCommand::Read(rw)
    };
    cmd.to_sqe().expect("sqe")
}

struct Setup {
    rig: Rig,
    admin: Controller<MemFabric>,
    q: RawQueue,
    nsze: u64,
    reference: Vec<u8>,
}

fn connect_data(cntlid: u16) -> ConnectData {
    let h = host(1);
    ConnectData {
        hostid: h.hostid,
        cntlid,
        subnqn: Nqn::new(SUBNQN).unwrap(),
        hostnqn: h.hostnqn,
    }
}

fn setup() -> Setup {
    let rig = default_rig();
    let mut o = options(1);
    o.io_queues = 0;
    o.aer = false;
    o.kato = Duration::from_secs(30);
    let mut admin = connect_with(&rig, 1, o).unwrap();
    let nsze = admin.namespace(raidline_initiator::Nsid(1)).unwrap().blocks;
    admin
        .set_features(
            FeatureId::NUMBER_OF_QUEUES,
            NumberOfQueues::from_counts(2, 2).unwrap().to_dword(),
        )
        .unwrap();
    let mut q = RawQueue::connect(
        &rig.net,
        "host1-raw",
        rig.target.local_addrs()[0],
        1,
        32,
        admin.cntlid(),
    )
    .unwrap();
    let cqe = q.fabrics_connect(0, &connect_data(admin.cntlid())).unwrap();
    assert!(
        cqe.status.is_success(),
        "I/O queue connect: {:?}",
        cqe.status
    );
    assert_eq!(cqe.dw0() as u16, admin.cntlid());
    let reference = pattern(0xAB, REF_BLOCKS as usize * BS);
    q.write_data(0, &reference);
    let sgl = q.keyed(0, reference.len() as u32);
    let cqe = q.exec(rw(true, 1, REF_LBA, REF_BLOCKS, sgl), &[]).unwrap();
    assert!(cqe.status.is_success(), "reference write: {:?}", cqe.status);
    Setup {
        rig,
        admin,
        q,
        nsze,
        reference,
    }
}

impl Setup {
    /// Sends `sqe` and checks the exact status, the SQ head and the queue id.
    fn expect(&mut self, what: &str, sqe: Sqe, icd: &[u8], want: Status) -> Cqe {
        let cqe = self
            .q
            .exec(sqe, icd)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(cqe.status, want, "{what}");
        assert_eq!(
            u32::from(cqe.sq_head),
            self.q.sent() % u32::from(self.q.depth()),
            "{what}: SQ head"
        );
        assert_eq!(cqe.sq_id, self.q.qid(), "{what}: SQ id");
        self.read_ok(what);
        cqe
    }

    /// A normal keyed read of the reference blocks succeeds with the reference data.
    fn read_ok(&mut self, after: &str) {
        let len = self.reference.len();
        self.q.write_data(0, &vec![0xEE; len]);
        let sgl = self.q.keyed(0, len as u32);
        let cqe = self
            .q
            .exec(rw(false, 1, REF_LBA, REF_BLOCKS, sgl), &[])
            .unwrap_or_else(|e| panic!("read after {after}: {e}"));
        assert!(
            cqe.status.is_success(),
            "read after {after}: {:?}",
            cqe.status
        );
        assert!(
            self.q.read_data(0, len) == self.reference,
            "read after {after}: wrong data"
        );
    }
}

fn dnr(code: StatusCode) -> Status {
    Status::new(code).dnr()
}

#[test]
fn malformed_io_capsules_get_exact_statuses() {
    let mut s = setup();
    let keyed = |s: &Setup, len: u32| s.q.keyed(0, len);

    // Unknown I/O opcodes (vendor 0x99; Compare 0x05 is not supported either).
    let mut sqe = Sqe::new(0x99, 0);
    sqe.set_nsid(1);
    sqe.set_sgl1(&keyed(&s, 0)).unwrap();
    s.expect("opcode 0x99", sqe, &[], dnr(StatusCode::INVALID_OPCODE));
    let mut sqe = rw(false, 1, 0, 1, keyed(&s, 4096));
    sqe.as_bytes_mut()[0] = 0x05;
    s.expect("Compare", sqe, &[], dnr(StatusCode::INVALID_OPCODE));

    // LBA out of range: straddling the end, past the end, and a wrapping SLBA.
    let nsze = s.nsze;
    let sqe = rw(false, 1, nsze - 1, 2, keyed(&s, 8192));
    s.expect(
        "read straddling the end",
        sqe,
        &[],
        dnr(StatusCode::LBA_OUT_OF_RANGE),
    );
    let sqe = rw(true, 1, nsze, 1, keyed(&s, 4096));
    s.expect(
        "write past the end",
        sqe,
        &[],
        dnr(StatusCode::LBA_OUT_OF_RANGE),
    );
    let sqe = rw(false, 1, u64::MAX, 2, keyed(&s, 8192));
    s.expect("wrapping SLBA", sqe, &[], dnr(StatusCode::LBA_OUT_OF_RANGE));

    // Over MDTS (1 MiB): 257 blocks with a matching keyed SGL.
    let sqe = rw(false, 1, 0, 257, keyed(&s, 257 * 4096));
    s.expect("read over MDTS", sqe, &[], dnr(StatusCode::INVALID_FIELD));
    let sqe = rw(true, 1, 0, 257, keyed(&s, 257 * 4096));
    s.expect("write over MDTS", sqe, &[], dnr(StatusCode::INVALID_FIELD));

    // Bad SGL identifiers: a reserved type (7) and a keyed data block with a reserved
    // subtype (3), as raw bytes; then well-formed descriptors of types that are not a
    // fabrics data pointer: segment, last segment, bit bucket, data block with an address.
    for (what, id) in [("SGL type 7", 0x70u8), ("keyed SGL subtype 3", 0x43)] {
        let mut sqe = rw(false, 1, 0, 1, keyed(&s, 4096));
        sqe.as_bytes_mut()[39] = id;
        s.expect(what, sqe, &[], dnr(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID));
    }
    let addr = match keyed(&s, 4096) {
        SglDescriptor::Keyed { address, .. } => address,
        _ => unreachable!(),
    };
    for (what, sgl) in [
        (
            "SGL segment",
            SglDescriptor::Segment {
                last: false,
                subtype: SglSubtype::ADDRESS,
                address: addr,
                length: 64,
            },
        ),
        (
            "SGL last segment",
            SglDescriptor::Segment {
                last: true,
                subtype: SglSubtype::ADDRESS,
                address: addr,
                length: 64,
            },
        ),
        ("SGL bit bucket", SglDescriptor::BitBucket { length: 4096 }),
        (
            "data block with an address",
            SglDescriptor::DataBlock {
                address: addr,
                length: 4096,
            },
        ),
    ] {
        for write in [false, true] {
            let sqe = rw(write, 1, REF_LBA, 1, sgl);
            let what = format!("{what} ({})", if write { "write" } else { "read" });
            s.expect(
                &what,
                sqe,
                &[],
                dnr(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID),
            );
        }
    }
    // PRPs are not a fabrics data pointer.
    let mut sqe = rw(false, 1, 0, 1, keyed(&s, 4096));
    sqe.set_psdt(Psdt::PRP);
    s.expect("PSDT = PRP", sqe, &[], dnr(StatusCode::INVALID_FIELD));

    // Keyed SGL length ≠ transfer length.
    let sqe = rw(false, 1, 0, 2, keyed(&s, 4096));
    s.expect(
        "read, SGL shorter",
        sqe,
        &[],
        dnr(StatusCode::DATA_SGL_LENGTH_INVALID),
    );
    let sqe = rw(true, 1, 0, 1, keyed(&s, 8192));
    s.expect(
        "write, SGL longer",
        sqe,
        &[],
        dnr(StatusCode::DATA_SGL_LENGTH_INVALID),
    );

    // In-capsule data: offset ≠ 0; length ≠ transfer; less data than the SGL says.
    let icd = pattern(3, 4096 + 64);
    let sqe = rw(
        true,
        1,
        REF_LBA,
        1,
        SglDescriptor::InCapsule {
            offset: 64,
            length: 4096,
        },
    );
    s.expect(
        "in-capsule offset 64",
        sqe,
        &icd,
        dnr(StatusCode::SGL_OFFSET_INVALID),
    );
    let sqe = rw(
        true,
        1,
        REF_LBA,
        2,
        SglDescriptor::InCapsule {
            offset: 0,
            length: 4096,
        },
    );
    s.expect(
        "in-capsule 4 KiB for 2 blocks",
        sqe,
        &icd[..4096],
        dnr(StatusCode::DATA_SGL_LENGTH_INVALID),
    );
    let sqe = rw(
        true,
        1,
        REF_LBA,
        1,
        SglDescriptor::InCapsule {
            offset: 0,
            length: 4096,
        },
    );
    s.expect(
        "in-capsule SGL over 512 bytes sent",
        sqe,
        &icd[..512],
        dnr(StatusCode::DATA_SGL_LENGTH_INVALID),
    );

    // Read with an in-capsule SGL.
    let sqe = rw(
        false,
        1,
        0,
        1,
        SglDescriptor::InCapsule {
            offset: 0,
            length: 4096,
        },
    );
    s.expect(
        "read with in-capsule SGL",
        sqe,
        &[],
        dnr(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID),
    );

    // Protection information on a namespace without it.
    let mut sqe = rw(false, 1, 0, 1, keyed(&s, 4096));
    let cdw12 = sqe.cdw(12) | 1 << 26;
    sqe.set_cdw(12, cdw12);
    s.expect("PRINFO set", sqe, &[], dnr(StatusCode::INVALID_FIELD));

    // Invalid namespaces: 2 (not attached), 0, and the broadcast id for a read.
    for nsid in [2u32, 0, 0xFFFF_FFFF] {
        let sqe = rw(false, nsid, 0, 1, keyed(&s, 4096));
        s.expect(
            &format!("read of nsid {nsid:#x}"),
            sqe,
            &[],
            dnr(StatusCode::INVALID_NAMESPACE),
        );
    }
    let sqe = IoCommand::Flush { cid: 0, nsid: 7 }.to_sqe().unwrap();
    s.expect(
        "flush of nsid 7",
        sqe,
        &[],
        dnr(StatusCode::INVALID_NAMESPACE),
    );

    // Write Zeroes and Dataset Management out of range.
    let sqe = IoCommand::WriteZeroes(WriteZeroes {
        cid: 0,
        nsid: 1,
        slba: nsze - 4,
        nlb: 5,
        deallocate: false,
        fua: false,
        limited_retry: false,
        prinfo: 0,
    })
    .to_sqe()
    .unwrap();
    s.expect(
        "write zeroes past the end",
        sqe,
        &[],
        dnr(StatusCode::LBA_OUT_OF_RANGE),
    );
    let ranges = DsmRange::list_to_bytes(&[
        DsmRange {
            attributes: 0,
            nlb: 1,
            slba: 0,
        },
        DsmRange {
            attributes: 0,
            nlb: 8,
            slba: nsze - 1,
        },
    ]);
    let sqe = IoCommand::DatasetManagement(DatasetManagement {
        cid: 0,
        nsid: 1,
        sgl: SglDescriptor::InCapsule {
            offset: 0,
            length: ranges.len() as u32,
        },
        ranges: 2,
        idr: false,
        idw: false,
        deallocate: true,
    })
    .to_sqe()
    .unwrap();
    s.expect(
        "DSM range past the end",
        sqe,
        &ranges,
        dnr(StatusCode::LBA_OUT_OF_RANGE),
    );

    // Fabrics commands that do not belong on an I/O queue, and a second Connect.
    let sqe = PropertyGet {
        cid: 0,
        size: PropertySize::Eight,
        offset: 0,
    }
    .to_sqe();
    s.expect(
        "Property Get on an I/O queue",
        sqe,
        &[],
        dnr(StatusCode::INVALID_OPCODE),
    );
    let cntlid = s.admin.cntlid();
    let cqe = s.q.fabrics_connect(0, &connect_data(cntlid)).unwrap();
    assert_eq!(
        cqe.status,
        dnr(StatusCode::CONNECT_CONTROLLER_BUSY),
        "second Connect on the I/O queue"
    );
    s.read_ok("second Connect");

    // And a well-formed in-capsule write still lands (then the reference is restored).
    let data = pattern(5, 8192);
    let sqe = rw(
        true,
        1,
        REF_LBA,
        2,
        SglDescriptor::InCapsule {
            offset: 0,
            length: 8192,
        },
    );
    let cqe = s.q.exec(sqe, &data).unwrap();
    assert!(
        cqe.status.is_success(),
        "in-capsule write: {:?}",
        cqe.status
    );
    let sgl = s.q.keyed(0, 8192);
    let cqe = s.q.exec(rw(false, 1, REF_LBA, 2, sgl), &[]).unwrap();
    assert!(cqe.status.is_success());
    assert!(s.q.read_data(0, 8192) == data, "in-capsule write read back");
    assert_eq!(copied(&s.rig.target), 0);
}

#[test]
fn malformed_admin_and_connect_sequence() {
    let mut s = setup();
    // Unknown admin opcodes: vendor specific 0xC1 and reserved 0x03.
    for op in [0xC1u8, 0x03] {
        let mut sqe = Sqe::new(op, 0);
        sqe.set_nsid(0);
        match s
            .admin
            .admin
            .execute(sqe, Xfer::None, "unknown admin", &[], &mut [])
        {
            Err(Error::Nvme { status, .. }) => {
                assert_eq!(
                    status,
                    dnr(StatusCode::INVALID_OPCODE),
                    "admin opcode {op:#x}"
                )
            }
            other => panic!("admin opcode {op:#x}: {other:?}"),
        }
        s.admin.identify_controller().unwrap();
    }
    // A Disconnect on the admin queue; a second Connect on it.
    let sqe = Disconnect { cid: 0, recfmt: 0 }.to_sqe();
    match s
        .admin
        .admin
        .execute(sqe, Xfer::None, "Disconnect", &[], &mut [])
    {
        Err(Error::Nvme { status, .. }) => {
            assert_eq!(
                status,
                dnr(StatusCode::INVALID_OPCODE),
                "Disconnect on the admin queue"
            )
        }
        other => panic!("Disconnect on the admin queue: {other:?}"),
    }
    let cntlid = s.admin.cntlid();
    match fabrics_connect(
        &mut s.admin.admin.q,
        Duration::from_secs(30),
        &connect_data(0xFFFF),
        None,
    ) {
        Err(Error::Nvme { status, .. }) => assert_eq!(
            status,
            dnr(StatusCode::CONNECT_CONTROLLER_BUSY),
            "second Connect on the admin queue"
        ),
        other => panic!("second Connect on the admin queue: {other:?}"),
    }
    assert_eq!(s.admin.identify_controller().unwrap().cntlid, cntlid);

    // A fresh queue: a command before Connect is a sequence error; then Connect works.
    let mut q2 = RawQueue::connect(
        &s.rig.net,
        "host1-raw2",
        s.rig.target.local_addrs()[0],
        2,
        8,
        cntlid,
    )
    .unwrap();
    let sgl = q2.keyed(0, 4096);
    let cqe = q2.exec(rw(false, 1, 0, 1, sgl), &[]).unwrap();
    assert_eq!(cqe.status.code, StatusCode::COMMAND_SEQUENCE_ERROR);
    // Connect naming another queue id than the RDMA CM request did.
    let bytes = connect_data(cntlid).to_bytes();
    q2.write_data(0, &bytes);
    let mut c = Connect {
        cid: 0,
        sgl: q2.keyed(0, bytes.len() as u32),
        recfmt: 0,
        qid: 3,
        sqsize: 7,
        cattr: 0,
        kato: 0,
    };
    let cqe = q2.exec(c.to_sqe().unwrap(), &[]).unwrap();
    assert_eq!(
        cqe.status,
        dnr(StatusCode::CONNECT_INVALID_PARAMETERS),
        "qid ≠ CM qid"
    );
    assert_eq!(
        ConnectResponse::invalid_from_dw0(cqe.dw0()),
        ConnectResponse::InvalidParameter {
            attribute: InvalidParameterIn::Command,
            offset: Connect::OFFSET_QID,
        }
    );
    // Connect data shorter than 1024 bytes.
    c.qid = 2;
    c.sgl = q2.keyed(0, 512);
    let cqe = q2.exec(c.to_sqe().unwrap(), &[]).unwrap();
    assert_eq!(
        cqe.status,
        dnr(StatusCode::DATA_SGL_LENGTH_INVALID),
        "512-byte Connect data"
    );
    // Connect to a controller id that does not exist.
    let cqe = q2
        .fabrics_connect(0, &connect_data(cntlid.wrapping_add(77)))
        .unwrap();
    assert_eq!(
        cqe.status,
        dnr(StatusCode::CONNECT_INVALID_PARAMETERS),
        "unknown cntlid"
    );
    assert_eq!(
        ConnectResponse::invalid_from_dw0(cqe.dw0()),
        ConnectResponse::InvalidParameter {
            attribute: InvalidParameterIn::Data,
            offset: ConnectData::OFFSET_CNTLID,
        }
    );
    let cqe = q2.fabrics_connect(0, &connect_data(cntlid)).unwrap();
    assert!(
        cqe.status.is_success(),
        "connect after errors: {:?}",
        cqe.status
    );
    let sgl = q2.keyed(0, 8192);
    let cqe = q2.exec(rw(false, 1, REF_LBA, 2, sgl), &[]).unwrap();
    assert!(cqe.status.is_success());
    assert!(q2.read_data(0, 8192) == s.reference);
    // The same queue id again, on yet another connection: busy.
    let mut q3 = RawQueue::connect(
        &s.rig.net,
        "host1-raw3",
        s.rig.target.local_addrs()[0],
        2,
        8,
        cntlid,
    )
    .unwrap();
    let cqe = q3.fabrics_connect(0, &connect_data(cntlid)).unwrap();
    assert_eq!(
        cqe.status,
        dnr(StatusCode::CONNECT_CONTROLLER_BUSY),
        "qid 2 twice"
    );
    s.read_ok("everything above");
}

#[test]
fn segment_sgl_with_nonzero_reserved_bytes_is_descriptor_type_invalid() {
    let mut s = setup();
    // A keyed descriptor re-typed as a segment (0x20): bytes 11..15 carry the old key.
    // Linux nvmet switches on the type first and answers SGL Descriptor Type Invalid.
    for id in [0x20u8, 0x30] {
        let mut sqe = rw(false, 1, 0, 1, s.q.keyed(0, 4096));
        sqe.as_bytes_mut()[39] = id;
        s.expect(
            &format!("segment type {id:#x} with a key in its reserved bytes"),
            sqe,
            &[],
            dnr(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID),
        );
    }
}

#[test]
fn garbage_capsules_close_only_their_queue() {
    let mut s = setup();
    let mut other = connect(&s.rig, 2);
    let ns = other.namespace(raidline_initiator::Nsid(1)).unwrap();
    let cntlid = s.admin.cntlid();
    let conns = |s: &Setup| {
        let ctrls = s.rig.target.shared().controllers.lock().unwrap();
        let mut q: Vec<u16> = ctrls[&cntlid].conns.iter().map(|(q, _, _)| *q).collect();
        q.sort_unstable();
        q
    };
    assert_eq!(conns(&s), vec![0, 1]);
    let addr = s.rig.target.local_addrs()[0];

    // A 32-byte capsule: not even a command.
    let r = s.q.exec_bytes(&[0x5A; 32], 0x5A5A);
    assert!(
        matches!(&r, Err(e) if e.contains("disconnected")),
        "a short capsule: {r:?}"
    );
    assert!(
        eventually(Duration::from_secs(3), || conns(&s) == vec![0]),
        "queue 1 still listed after a short capsule: {:?}",
        conns(&s)
    );

    // A capsule larger than the in-capsule limit (64 + 8192 + 4096 bytes).
    let mut q = RawQueue::connect(&s.rig.net, "raw-big", addr, 1, 8, cntlid).unwrap();
    let cqe = q.fabrics_connect(0, &connect_data(cntlid)).unwrap();
    assert!(cqe.status.is_success(), "{:?}", cqe.status);
    let mut sqe = rw(
        true,
        1,
        REF_LBA,
        3,
        SglDescriptor::InCapsule {
            offset: 0,
            length: 3 * 4096,
        },
    );
    sqe.set_cid(77);
    let mut capsule = sqe.as_bytes().to_vec();
    capsule.extend_from_slice(&pattern(1, 3 * 4096));
    // The target's receive buffer cannot hold it: the send fails on the wire (as on a real
    // RC QP) and the target closes the queue.
    let r = q.exec_bytes(&capsule, 77);
    assert!(r.is_err(), "an oversized capsule was answered: {r:?}");
    drop(q);

    // Everyone else is unaffected; the reference data is intact.
    let mut back = vec![0u8; s.reference.len()];
    other
        .read(0, &ns, raidline_initiator::Lba(REF_LBA), &mut back)
        .unwrap();
    assert!(back == s.reference, "the oversized write must not land");
    s.admin.identify_controller().unwrap();
    assert!(eventually(Duration::from_secs(3), || conns(&s) == vec![0]));
    let mut q = RawQueue::connect(&s.rig.net, "raw-again", addr, 1, 8, cntlid).unwrap();
    assert!(q
        .fabrics_connect(0, &connect_data(cntlid))
        .unwrap()
        .status
        .is_success());
    other.shutdown().unwrap();
}

#[test]
fn connect_parameters_out_of_range() {
    let s = setup();
    let cntlid = s.admin.cntlid();
    let addr = s.rig.target.local_addrs()[0];
    let ipo = |cqe: &Cqe| ConnectResponse::invalid_from_dw0(cqe.dw0());
    let invalid = dnr(StatusCode::CONNECT_INVALID_PARAMETERS);

    // An I/O queue id over the target's limit (16), and queue sizes over the limits: refused
    // already in the RDMA CM exchange, with the NVMe/RDMA reject status.
    for (what, qid, depth, want) in [
        ("qid 17", 17u16, 8u16, CmRejectStatus::INVALID_QID),
        ("I/O queue of 129", 1, 129, CmRejectStatus::INVALID_HSQSIZE),
        ("admin queue of 33", 0, 33, CmRejectStatus::INVALID_HSQSIZE),
    ] {
        match RawQueue::connect(&s.rig.net, "raw-cm", addr, qid, depth, cntlid) {
            Err(e) => assert!(
                e.ends_with(&format!("NVMe/RDMA status {}", want.0)),
                "{what}: {e}"
            ),
            Ok(_) => panic!("{what}: accepted"),
        }
    }

    // An admin queue asking for a static controller id.
    let mut q = RawQueue::connect(&s.rig.net, "raw-static", addr, 0, 32, 0).unwrap();
    let cqe = q.fabrics_connect(0, &connect_data(5)).unwrap();
    assert_eq!(cqe.status, invalid, "static cntlid");
    assert_eq!(
        ipo(&cqe),
        ConnectResponse::InvalidParameter {
            attribute: InvalidParameterIn::Data,
            offset: ConnectData::OFFSET_CNTLID,
        }
    );
    // The same queue then connects properly as a new controller.
    let cqe = q.fabrics_connect(0, &connect_data(0xFFFF)).unwrap();
    assert!(cqe.status.is_success(), "{:?}", cqe.status);
    assert_ne!(cqe.dw0() as u16, cntlid);
    drop(q);

    // An I/O queue Connect whose SQSIZE is 0 (a one-entry queue).
    let mut q = RawQueue::connect(&s.rig.net, "raw-sq0", addr, 2, 8, cntlid).unwrap();
    let bytes = connect_data(cntlid).to_bytes();
    q.write_data(0, &bytes);
    let sqe = Connect {
        cid: 0,
        sgl: q.keyed(0, bytes.len() as u32),
        recfmt: 0,
        qid: 2,
        sqsize: 0,
        cattr: 0,
        kato: 0,
    }
    .to_sqe()
    .unwrap();
    let cqe = q.exec(sqe, &[]).unwrap();
    assert_eq!(cqe.status, invalid, "sqsize 0");
    assert_eq!(
        ipo(&cqe),
        ConnectResponse::InvalidParameter {
            attribute: InvalidParameterIn::Command,
            offset: Connect::OFFSET_SQSIZE,
        }
    );
    // A record format other than 0.
    let sqe = Connect {
        cid: 0,
        sgl: q.keyed(0, bytes.len() as u32),
        recfmt: 1,
        qid: 2,
        sqsize: 7,
        cattr: 0,
        kato: 0,
    }
    .to_sqe()
    .unwrap();
    let cqe = q.exec(sqe, &[]).unwrap();
    assert_eq!(
        cqe.status.code,
        StatusCode::CONNECT_INCOMPATIBLE_FORMAT,
        "recfmt 1"
    );
    let cqe = q.fabrics_connect(0, &connect_data(cntlid)).unwrap();
    assert!(cqe.status.is_success(), "{:?}", cqe.status);
}

#[test]
fn malformed_admin_capsules_on_a_raw_admin_queue() {
    use raidline_proto::admin::{Abort, GetLogPage, Identify, KeepAlive, SetFeatures};
    use raidline_proto::fabrics::property::{self, Cc, Csts};
    use raidline_proto::fabrics::PropertySet;
    use raidline_proto::features::{FeatureId, NumberOfQueues};
    use raidline_proto::identify::{Cns, IdentifyController};
    use raidline_proto::log::LogPageId;
    let rig = default_rig();
    let addr = rig.target.local_addrs()[0];
    let mut q = RawQueue::connect(&rig.net, "raw-admin", addr, 0, 32, 0).unwrap();
    let cqe = q.fabrics_connect(0, &connect_data(0xFFFF)).unwrap();
    assert!(cqe.status.is_success(), "{:?}", cqe.status);
    let cntlid = cqe.dw0() as u16;
    let null = SglDescriptor::Keyed {
        address: 0,
        length: 0,
        key: 0,
        invalidate: false,
    };
    let prop_set = |q: &mut RawQueue, offset: u32, size: PropertySize, value: u64| {
        let mut sqe = PropertySet {
            cid: 0,
            size,
            offset,
            value,
        }
        .to_sqe();
        sqe.set_sgl1(&null).unwrap();
        q.exec(sqe, &[]).unwrap().status
    };
    let prop_get = |q: &mut RawQueue, offset: u32, size: PropertySize| {
        let mut sqe = PropertyGet {
            cid: 0,
            size,
            offset,
        }
        .to_sqe();
        sqe.set_sgl1(&null).unwrap();
        q.exec(sqe, &[]).unwrap()
    };
    let identify = |q: &mut RawQueue, cns: Cns, nsid: u32, sgl: SglDescriptor| {
        q.exec(Identify::new(0, cns, nsid, sgl).to_sqe().unwrap(), &[])
            .unwrap()
    };
    // Works: Identify Controller into the first 4 KiB of the data area.
    let identify_ok = |q: &mut RawQueue, what: &str| {
        let sgl = q.keyed(0, 4096);
        let cqe = identify(q, Cns::CONTROLLER, 0, sgl);
        assert!(
            cqe.status.is_success(),
            "Identify after {what}: {:?}",
            cqe.status
        );
        let id = IdentifyController::parse(&q.read_data(0, 4096)).unwrap();
        assert_eq!(id.cntlid, cntlid, "after {what}");
    };

    // Before CC.EN: admin commands are a sequence error.
    let sgl = q.keyed(0, 4096);
    let cqe = identify(&mut q, Cns::CONTROLLER, 0, sgl);
    assert_eq!(
        cqe.status.code,
        StatusCode::COMMAND_SEQUENCE_ERROR,
        "before CC.EN"
    );
    // Properties: wrong size, unknown offset, read-only property.
    let st = prop_get(&mut q, property::CAP, PropertySize::Four).status;
    assert_eq!(st, dnr(StatusCode::INVALID_FIELD), "CAP read as 4 bytes");
    let st = prop_get(&mut q, 0x44, PropertySize::Four).status;
    assert_eq!(st, dnr(StatusCode::INVALID_FIELD), "property 0x44");
    let st = prop_set(&mut q, property::VS, PropertySize::Four, 0);
    assert_eq!(st, dnr(StatusCode::INVALID_FIELD), "Property Set of VS");
    // Enabling with 128-byte SQEs is a controller fatal status; commands stay refused.
    let good = Cc {
        en: true,
        css: 0,
        mps: 0,
        ams: 0,
        shn: 0,
        iosqes: 6,
        iocqes: 4,
        crime: false,
    };
    let bad = Cc { iosqes: 7, ..good };
    assert!(prop_set(
        &mut q,
        property::CC,
        PropertySize::Four,
        u64::from(bad.to_u32())
    )
    .is_success());
    let csts = Csts::from_u32(prop_get(&mut q, property::CSTS, PropertySize::Four).dw0());
    assert!(csts.cfs && !csts.rdy, "{csts:?}");
    let sgl = q.keyed(0, 4096);
    let cqe = identify(&mut q, Cns::CONTROLLER, 0, sgl);
    assert_eq!(
        cqe.status.code,
        StatusCode::COMMAND_SEQUENCE_ERROR,
        "after CFS"
    );
    // Reset (CC.EN = 0), then a good enable.
    let off = Cc { en: false, ..good };
    assert!(prop_set(
        &mut q,
        property::CC,
        PropertySize::Four,
        u64::from(off.to_u32())
    )
    .is_success());
    assert!(prop_set(
        &mut q,
        property::CC,
        PropertySize::Four,
        u64::from(good.to_u32())
    )
    .is_success());
    let csts = Csts::from_u32(prop_get(&mut q, property::CSTS, PropertySize::Four).dw0());
    assert!(csts.rdy && !csts.cfs, "{csts:?}");
    identify_ok(&mut q, "enable");

    // Identify: short SGL, in-capsule SGL, unknown CNS, namespaces 0 and 2.
    let sgl = q.keyed(0, 2048);
    let st = identify(&mut q, Cns::CONTROLLER, 0, sgl).status;
    assert_eq!(
        st,
        dnr(StatusCode::DATA_SGL_LENGTH_INVALID),
        "2 KiB Identify"
    );
    identify_ok(&mut q, "2 KiB Identify");
    let icd = SglDescriptor::InCapsule {
        offset: 0,
        length: 4096,
    };
    let st = identify(&mut q, Cns::CONTROLLER, 0, icd).status;
    assert_eq!(
        st,
        dnr(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID),
        "in-capsule Identify"
    );
    identify_ok(&mut q, "in-capsule Identify");
    let sgl = q.keyed(0, 4096);
    let st = identify(&mut q, Cns(0x1F), 0, sgl).status;
    assert_eq!(st, dnr(StatusCode::INVALID_FIELD), "CNS 1Fh");
    for nsid in [0u32, 2] {
        let sgl = q.keyed(0, 4096);
        let st = identify(&mut q, Cns::NAMESPACE, nsid, sgl).status;
        assert_eq!(st, dnr(StatusCode::INVALID_NAMESPACE), "Identify NS {nsid}");
    }
    identify_ok(&mut q, "bad Identify fields");

    // Get Log Page of an unsupported page; with an SGL shorter than NUMD says.
    let sgl = q.keyed(0, 512);
    let glp = GetLogPage::read(0, LogPageId(0x7F), 0xFFFF_FFFF, 0, 512, sgl).unwrap();
    let st = q.exec(glp.to_sqe().unwrap(), &[]).unwrap().status;
    assert_eq!(st, dnr(StatusCode::INVALID_FIELD), "log page 7Fh");
    let sgl = q.keyed(0, 256);
    let glp = GetLogPage::read(0, LogPageId::SMART, 0xFFFF_FFFF, 0, 512, sgl).unwrap();
    let st = q.exec(glp.to_sqe().unwrap(), &[]).unwrap().status;
    assert_eq!(
        st,
        dnr(StatusCode::DATA_SGL_LENGTH_INVALID),
        "SMART into 256 bytes"
    );

    // Set Features: unsupported FID, save bit, Number of Queues twice.
    let sf = SetFeatures::dword(0, FeatureId(0x99), 1, null);
    let st = q.exec(sf.to_sqe().unwrap(), &[]).unwrap().status;
    assert_eq!(st, dnr(StatusCode::INVALID_FIELD), "FID 99h");
    let mut sf = SetFeatures::dword(0, FeatureId::KEEP_ALIVE_TIMER, 5000, null);
    sf.save = true;
    let st = q.exec(sf.to_sqe().unwrap(), &[]).unwrap().status;
    assert_eq!(st, dnr(StatusCode::FEATURE_NOT_SAVEABLE), "save bit");
    let nq = NumberOfQueues::from_counts(2, 2).unwrap().to_dword();
    let sf = SetFeatures::dword(0, FeatureId::NUMBER_OF_QUEUES, nq, null);
    let cqe = q.exec(sf.to_sqe().unwrap(), &[]).unwrap();
    assert!(cqe.status.is_success());
    let granted = NumberOfQueues::from_dword(cqe.dw0()).unwrap();
    assert_eq!((granted.sq_count(), granted.cq_count()), (2, 2));
    let st = q.exec(sf.to_sqe().unwrap(), &[]).unwrap().status;
    assert_eq!(
        st,
        dnr(StatusCode::COMMAND_SEQUENCE_ERROR),
        "Number of Queues twice"
    );

    // Abort of a command that does not exist: completes, "not aborted"; Keep Alive.
    let cqe = q
        .exec(
            Abort {
                cid: 0,
                sqid: 0,
                target_cid: 0x4242,
            }
            .to_sqe(),
            &[],
        )
        .unwrap();
    assert!(cqe.status.is_success());
    assert_eq!(cqe.dw0() & 1, Abort::DW0_NOT_ABORTED);
    let mut ka = KeepAlive { cid: 0 }.to_sqe();
    ka.set_sgl1(&null).unwrap();
    assert!(q.exec(ka, &[]).unwrap().status.is_success());
    identify_ok(&mut q, "everything above");
    // CC.SHN = normal: CSTS.SHST = complete.
    let shn = Cc { shn: 1, ..good };
    assert!(prop_set(
        &mut q,
        property::CC,
        PropertySize::Four,
        u64::from(shn.to_u32())
    )
    .is_success());
    let csts = Csts::from_u32(prop_get(&mut q, property::CSTS, PropertySize::Four).dw0());
    assert_eq!(csts.shst, property::shutdown::SHST_COMPLETE);
}

/// A raw admin queue of host 1, connected and enabled; returns it with its controller id.
fn raw_admin(rig: &Rig, dev: &str) -> (RawQueue, u16) {
    use raidline_proto::fabrics::property::{self, Cc, Csts};
    use raidline_proto::fabrics::PropertySet;
    let mut q = RawQueue::connect(&rig.net, dev, rig.target.local_addrs()[0], 0, 32, 0).unwrap();
    let cqe = q.fabrics_connect(0, &connect_data(0xFFFF)).unwrap();
    assert!(cqe.status.is_success(), "{:?}", cqe.status);
    let cc = Cc {
        en: true,
        css: 0,
        mps: 0,
        ams: 0,
        shn: 0,
        iosqes: 6,
        iocqes: 4,
        crime: false,
    };
    let null = SglDescriptor::Keyed {
        address: 0,
        length: 0,
        key: 0,
        invalidate: false,
    };
    let mut sqe = PropertySet {
        cid: 0,
        size: PropertySize::Four,
        offset: property::CC,
        value: u64::from(cc.to_u32()),
    }
    .to_sqe();
    sqe.set_sgl1(&null).unwrap();
    assert!(q.exec(sqe, &[]).unwrap().status.is_success());
    let mut sqe = PropertyGet {
        cid: 0,
        size: PropertySize::Four,
        offset: property::CSTS,
    }
    .to_sqe();
    sqe.set_sgl1(&null).unwrap();
    assert!(Csts::from_u32(q.exec(sqe, &[]).unwrap().dw0()).rdy);
    (q, cqe.dw0() as u16)
}

#[test]
fn asynchronous_event_requests_over_the_limit() {
    use raidline_proto::admin::{AsyncEventRequest, Identify};
    use raidline_proto::identify::{Cns, IdentifyController};
    let rig = default_rig();
    let (mut q, cntlid) = raw_admin(&rig, "raw-aer");
    let sgl = q.keyed(0, 4096);
    let cqe = q
        .exec(
            Identify::new(0, Cns::CONTROLLER, 0, sgl).to_sqe().unwrap(),
            &[],
        )
        .unwrap();
    assert!(cqe.status.is_success());
    let id = IdentifyController::parse(&q.read_data(0, 4096)).unwrap();
    assert_eq!(id.cntlid, cntlid);
    let limit = usize::from(id.aerl) + 1;
    assert_eq!(limit, 4, "AERL is 0's based: 4 outstanding");
    // As many as AERL + 1 are parked (no answer) ...
    for _ in 0..limit {
        q.post(AsyncEventRequest { cid: 0 }.to_sqe()).unwrap();
    }
    // ... one more is refused at once.
    let cqe = q.exec(AsyncEventRequest { cid: 0 }.to_sqe(), &[]).unwrap();
    assert_eq!(cqe.status, dnr(StatusCode::AER_LIMIT_EXCEEDED));
    // The parked ones do not block other admin commands.
    let sgl = q.keyed(0, 4096);
    let cqe = q
        .exec(
            Identify::new(0, Cns::CONTROLLER, 0, sgl).to_sqe().unwrap(),
            &[],
        )
        .unwrap();
    assert!(cqe.status.is_success());
}

#[test]
fn sq_flow_control_disabled_reports_head_ffff() {
    let s = setup();
    let cntlid = s.admin.cntlid();
    let addr = s.rig.target.local_addrs()[0];
    let mut q = RawQueue::connect(&s.rig.net, "raw-sqfc", addr, 2, 8, cntlid).unwrap();
    let bytes = connect_data(cntlid).to_bytes();
    q.write_data(0, &bytes);
    let sqe = Connect {
        cid: 0,
        sgl: q.keyed(0, bytes.len() as u32),
        recfmt: 0,
        qid: 2,
        sqsize: 7,
        cattr: raidline_proto::fabrics::CATTR_DISABLE_SQ_FLOW,
        kato: 0,
    }
    .to_sqe()
    .unwrap();
    let cqe = q.exec(sqe, &[]).unwrap();
    assert!(cqe.status.is_success(), "{:?}", cqe.status);
    for i in 0..10 {
        let sgl = q.keyed(0, 8192);
        let cqe = q.exec(rw(false, 1, REF_LBA, REF_BLOCKS, sgl), &[]).unwrap();
        assert!(cqe.status.is_success());
        assert_eq!(cqe.sq_head, 0xFFFF, "read {i}: SQ flow control is off");
        assert!(q.read_data(0, 8192) == s.reference);
    }
}

#[test]
fn losing_the_admin_queue_takes_the_io_queues_down() {
    let rig = default_rig();
    let (admin, cntlid) = raw_admin(&rig, "raw-admin-lost");
    let addr = rig.target.local_addrs()[0];
    let mut io = RawQueue::connect(&rig.net, "raw-io-orphan", addr, 1, 8, cntlid).unwrap();
    let cqe = io.fabrics_connect(0, &connect_data(cntlid)).unwrap();
    assert!(cqe.status.is_success(), "{:?}", cqe.status);
    let listed = || {
        rig.target
            .shared()
            .controllers
            .lock()
            .unwrap()
            .contains_key(&cntlid)
    };
    assert!(listed());
    // The host's admin connection goes away (a host crash as the target sees it).
    drop(admin);
    assert!(
        eventually(Duration::from_secs(3), || !listed()),
        "the controller outlived its admin queue"
    );
    // Its I/O queue is disconnected too: nothing is served on it any more.
    let sgl = io.keyed(0, 4096);
    let r = io.exec(rw(false, 1, 0, 1, sgl), &[]);
    assert!(
        r.is_err(),
        "an orphaned I/O queue still served a read: {r:?}"
    );
}
