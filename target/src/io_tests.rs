//! Every class of malformed I/O command gets its exact status with DNR.

use super::*;
use crate::subsystem::NamespaceIds;
use raidline_proto::io::{DatasetManagement, WriteZeroes};

fn ns() -> NamespaceInfo {
    NamespaceInfo {
        nsid: 1,
        block_size: 4096,
        blocks: 1000,
        ids: NamespaceIds {
            nguid: [0; 16],
            eui64: [0; 8],
            uuid: [0; 16],
        },
        preferred_write_blocks: 16,
        deallocate: true,
        active: Default::default(),
    }
}

fn keyed(length: u32) -> SglDescriptor {
    SglDescriptor::Keyed {
        address: 0x1000,
        length,
        key: 5,
        invalidate: false,
    }
}

fn rw(sgl: SglDescriptor, slba: u64, nlb: u32) -> ReadWrite {
    ReadWrite {
        cid: 1,
        nsid: 1,
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
    }
}

fn check(cmd: IoCommand, in_capsule: usize) -> Result<IoRequest, Status> {
    let n = ns();
    let sqe = cmd.to_sqe().unwrap();
    validate(&sqe, &Limits::default(), in_capsule, |id| {
        (id == 1).then_some(&n)
    })
}

fn code(r: Result<IoRequest, Status>) -> (StatusCode, bool) {
    let s = r.unwrap_err();
    (s.code, s.dnr)
}

#[test]
fn good_read_and_writes() {
    assert_eq!(
        check(IoCommand::Read(rw(keyed(8192), 10, 2)), 0).unwrap(),
        IoRequest::Read {
            nsid: 1,
            lba: 10,
            blocks: 2,
            data: DataLocation::Remote {
                address: 0x1000,
                length: 8192,
                key: 5,
                invalidate: false
            }
        }
    );
    let inc = SglDescriptor::InCapsule {
        offset: 0,
        length: 4096,
    };
    assert!(matches!(
        check(IoCommand::Write(rw(inc, 999, 1)), 4096).unwrap(),
        IoRequest::Write {
            data: DataLocation::InCapsule { length: 4096 },
            ..
        }
    ));
}

#[test]
fn range_namespace_and_size_errors() {
    assert_eq!(
        code(check(IoCommand::Read(rw(keyed(8192), 999, 2)), 0)),
        (StatusCode::LBA_OUT_OF_RANGE, true)
    );
    assert_eq!(
        code(check(IoCommand::Read(rw(keyed(4096), u64::MAX, 1)), 0)),
        (StatusCode::LBA_OUT_OF_RANGE, true)
    );
    let mut other = rw(keyed(4096), 0, 1);
    other.nsid = 2;
    assert_eq!(
        code(check(IoCommand::Write(other), 0)),
        (StatusCode::INVALID_NAMESPACE, true)
    );
    // 257 blocks = 1 MiB + 4 KiB: over MDTS.
    assert_eq!(
        code(check(IoCommand::Read(rw(keyed(257 * 4096), 0, 257)), 0)),
        (StatusCode::INVALID_FIELD, true)
    );
    let mut pi = rw(keyed(4096), 0, 1);
    pi.prinfo = 1;
    assert_eq!(
        code(check(IoCommand::Read(pi), 0)),
        (StatusCode::INVALID_FIELD, true)
    );
}

#[test]
fn sgl_errors() {
    // Length does not match the blocks.
    assert_eq!(
        code(check(IoCommand::Read(rw(keyed(4096), 0, 2)), 0)),
        (StatusCode::DATA_SGL_LENGTH_INVALID, true)
    );
    // Reads cannot use in-capsule data.
    let inc = SglDescriptor::InCapsule {
        offset: 0,
        length: 4096,
    };
    assert_eq!(
        code(check(IoCommand::Read(rw(inc, 0, 1)), 4096)),
        (StatusCode::SGL_DESCRIPTOR_TYPE_INVALID, true)
    );
    // In-capsule data at an offset, or more than arrived, or more than we offer.
    let off = SglDescriptor::InCapsule {
        offset: 16,
        length: 4096,
    };
    assert_eq!(
        code(check(IoCommand::Write(rw(off, 0, 1)), 8192)),
        (StatusCode::SGL_OFFSET_INVALID, true)
    );
    assert_eq!(
        code(check(IoCommand::Write(rw(inc, 0, 1)), 100)),
        (StatusCode::DATA_SGL_LENGTH_INVALID, true)
    );
    let big = SglDescriptor::InCapsule {
        offset: 0,
        length: 3 * 4096,
    };
    assert_eq!(
        code(check(IoCommand::Write(rw(big, 0, 3)), 3 * 4096)),
        (StatusCode::DATA_SGL_LENGTH_INVALID, true)
    );
    // Segments and plain data blocks are not offered (MSDBD 1, keyed only).
    let seg = SglDescriptor::Segment {
        last: true,
        subtype: raidline_proto::sgl::SglSubtype::ADDRESS,
        address: 0,
        length: 4096,
    };
    assert_eq!(
        code(check(IoCommand::Write(rw(seg, 0, 1)), 0)),
        (StatusCode::SGL_DESCRIPTOR_TYPE_INVALID, true)
    );
    // PRPs over fabrics.
    let n = ns();
    let mut sqe = IoCommand::Read(rw(keyed(4096), 0, 1)).to_sqe().unwrap();
    sqe.set_psdt(Psdt::PRP);
    assert_eq!(
        validate(&sqe, &Limits::default(), 0, |_| Some(&n)).unwrap_err(),
        dnr(StatusCode::INVALID_FIELD)
    );
    // An SGL identifier of a reserved type.
    sqe.as_bytes_mut()[39] = 0xE0;
    assert_eq!(
        validate(&sqe, &Limits::default(), 0, |_| Some(&n)).unwrap_err(),
        dnr(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID)
    );
}

#[test]
fn other_commands() {
    assert_eq!(
        check(
            IoCommand::Flush {
                cid: 1,
                nsid: 0xFFFF_FFFF
            },
            0
        )
        .unwrap(),
        IoRequest::Flush { nsid: 0xFFFF_FFFF }
    );
    assert_eq!(
        code(check(IoCommand::Flush { cid: 1, nsid: 7 }, 0)),
        (StatusCode::INVALID_NAMESPACE, true)
    );
    let wz = WriteZeroes {
        cid: 1,
        nsid: 1,
        slba: 990,
        nlb: 11,
        deallocate: false,
        fua: false,
        limited_retry: false,
        prinfo: 0,
    };
    assert_eq!(
        code(check(IoCommand::WriteZeroes(wz), 0)),
        (StatusCode::LBA_OUT_OF_RANGE, true)
    );
    let dsm = DatasetManagement {
        cid: 1,
        nsid: 1,
        sgl: keyed(32),
        ranges: 2,
        idr: false,
        idw: false,
        deallocate: true,
    };
    assert!(matches!(
        check(IoCommand::DatasetManagement(dsm), 0).unwrap(),
        IoRequest::DatasetManagement { ranges: 2, .. }
    ));
    // One range in a whole page, as the Linux host sends it: accepted; a list shorter than its
    // ranges, or over a page, is not.
    let page = DatasetManagement {
        ranges: 1,
        sgl: keyed(4096),
        ..dsm
    };
    assert!(check(IoCommand::DatasetManagement(page), 0).is_ok());
    for len in [16, 8192] {
        let short = DatasetManagement {
            sgl: keyed(len),
            ..dsm
        };
        assert_eq!(
            code(check(IoCommand::DatasetManagement(short), 0)),
            (StatusCode::DATA_SGL_LENGTH_INVALID, true)
        );
    }
    let unknown = IoCommand::Unsupported {
        cid: 1,
        opcode: raidline_proto::IoOpcode(0x7E),
    };
    assert_eq!(code(check(unknown, 0)), (StatusCode::INVALID_OPCODE, true));
    let cmp = IoCommand::Compare(rw(keyed(4096), 0, 1));
    assert_eq!(code(check(cmp, 0)), (StatusCode::INVALID_OPCODE, true));
}

#[test]
fn dsm_ranges_checked() {
    let n = ns();
    let ok = DsmRange::list_to_bytes(&[DsmRange {
        attributes: 0,
        nlb: 10,
        slba: 990,
    }]);
    assert_eq!(validate_dsm_ranges(&n, &ok, 1).unwrap().len(), 1);
    let bad = DsmRange::list_to_bytes(&[DsmRange {
        attributes: 0,
        nlb: 11,
        slba: 990,
    }]);
    assert_eq!(
        validate_dsm_ranges(&n, &bad, 1).unwrap_err(),
        dnr(StatusCode::LBA_OUT_OF_RANGE)
    );
    assert!(validate_dsm_ranges(&n, &ok, 2).is_err());
}

#[test]
fn a_disabled_namespace_answers_internal_path_error_without_dnr() {
    let n = ns();
    let read = IoCommand::Read(rw(keyed(4096), 0, 1)).to_sqe().unwrap();
    let lookup = |id: u32| (id == 1).then_some(&n);
    assert!(validate(&read, &Limits::default(), 0, lookup).is_ok());
    assert!(n.active.set(false), "it was active");
    // The clone shares the flag (what the subsystem and the daemon's table hold).
    assert!(!n.clone().active.get());
    let st = validate(&read, &Limits::default(), 0, lookup).unwrap_err();
    assert_eq!(st, Status::new(StatusCode::INTERNAL_PATH_ERROR));
    assert!(!st.dnr);
    let flush = IoCommand::Flush { cid: 1, nsid: 1 }.to_sqe().unwrap();
    assert_eq!(
        validate(&flush, &Limits::default(), 0, lookup).unwrap_err(),
        Status::new(StatusCode::INTERNAL_PATH_ERROR)
    );
    // Not configured at all: Invalid Namespace, DNR.
    let mut other = read;
    other.set_nsid(2);
    assert_eq!(
        validate(&other, &Limits::default(), 0, lookup).unwrap_err(),
        dnr(StatusCode::INVALID_NAMESPACE)
    );
    n.active.set(true);
    assert!(validate(&read, &Limits::default(), 0, lookup).is_ok());
}
