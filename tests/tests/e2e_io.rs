//! End-to-end I/O: connect and identify (controller, namespace, active list, descriptors),
//! read/write/verify at many sizes and unaligned offsets against a shadow copy (in-capsule and
//! keyed), Write Zeroes (up to 8 MiB in one command), Dataset Management deallocate (up to 256
//! ranges), Flush and FUA writes, the SMART counters, I/O queue Disconnect — with the
//! zero-copy counter at 0 throughout. Concurrency is in e2e_concurrency.rs.

mod common;

use std::time::Duration;

use common::*;
use raidline_initiator::io::{self as hio, IoOp};
use raidline_initiator::{Lba, Nsid, Xfer};
use raidline_proto::identify::{sgls, ControllerType};
use raidline_proto::io::{DsmRange, IoCommand, ReadWrite};
use raidline_proto::SglDescriptor;
use raidline_target::subsystem::Limits;

const BS: usize = 4096;

#[test]
fn identify_controller_namespace_and_lists() {
    let rig = default_rig();
    let mut c = connect(&rig, 1);
    let limits = Limits::default();
    let id = c.identify_controller().unwrap();
    assert_eq!(id.subnqn.as_ref().map(|n| n.as_str()), Some(SUBNQN));
    assert_eq!(id.cntlid, c.cntlid());
    assert_eq!(id.cntrltype, ControllerType::IO);
    assert_eq!(id.mdts, limits.mdts());
    assert_eq!(id.mdts, 8, "1 MiB transfers are MDTS 8 (4 KiB pages)");
    assert_ne!(id.sgls & sgls::KEYED, 0, "keyed SGLs");
    assert_ne!(id.sgls & sgls::OFFSET, 0, "in-capsule data (offset SGLs)");
    assert_eq!(id.ioccsz, limits.ioccsz());
    assert_eq!(id.ioccsz * 16 - 64, 8192, "8 KiB of in-capsule data");
    assert_eq!(c.in_capsule_max(), 8192);
    assert_eq!(id.icdoff, 0);
    let serial = raidline_target::identity::serial_for(&rig.array.uuid().0);
    assert_eq!(id.sn.trim_end(), serial);
    assert!(!serial.is_empty());
    assert!(id.nn >= 1);

    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1)]);
    let ns = c.namespace(Nsid(1)).unwrap();
    let geo = *rig.array.geometry();
    assert_eq!(ns.blocks, geo.capacity_blocks());
    assert_eq!(ns.id.nsze, geo.capacity_blocks());
    assert_eq!(ns.block_size, 4096);
    assert_eq!(ns.id.lba_format().lbads, 12);
    let stripe = geo.stripe_data_blocks();
    assert_eq!(
        stripe,
        3 * (CHUNK / BS) as u64,
        "3 data members × 16 blocks"
    );
    // NPWG and NOWS are 0's based.
    assert_eq!(u64::from(ns.id.npwg) + 1, stripe);
    assert_eq!(u64::from(ns.id.nows) + 1, stripe);

    let seen = seen_ids(&mut c, 1);
    let want = raidline_target::identity::for_array(rig.array.uuid().0, 1);
    assert_ne!(seen.nguid, [0; 16]);
    assert_ne!(seen.eui64, [0; 8]);
    assert_eq!(seen.nguid, want.nguid);
    assert_eq!(seen.eui64, want.eui64);
    assert_eq!(seen.desc_nguid, Some(want.nguid));
    assert_eq!(seen.desc_eui64, Some(want.eui64));
    let uuid = seen.desc_uuid.expect("UUID descriptor");
    assert_ne!(uuid, [0; 16]);
    assert_eq!(uuid, want.uuid);

    // A second host gets its own controller id and the same identifiers.
    let mut c2 = connect(&rig, 2);
    assert_ne!(c2.cntlid(), c.cntlid());
    assert_eq!(seen_ids(&mut c2, 1), seen);
    c2.shutdown().unwrap();
    c.shutdown().unwrap();
}

#[test]
fn read_write_many_sizes_and_offsets_against_a_shadow() {
    let rig = default_rig();
    let mut c = connect(&rig, 1);
    let ns = c.namespace(Nsid(1)).unwrap();
    const REGION: usize = 1024; // blocks modelled
    let mut shadow = vec![0u8; REGION * BS];
    // Every size 1..=16 and then a spread to 256, at offsets that straddle stripes (48 blocks).
    let mut sizes: Vec<usize> = (1..=16).collect();
    sizes.extend([
        17, 31, 47, 48, 49, 64, 95, 96, 97, 127, 128, 129, 200, 255, 256,
    ]);
    let mut rng = Rng(42);
    for (i, &n) in sizes.iter().enumerate() {
        let lba = rng.below((REGION - n) as u64) as usize;
        let data = pattern(1000 + i as u64, n * BS);
        c.write(0, &ns, Lba(lba as u64), &data).unwrap();
        shadow[lba * BS..(lba + n) * BS].copy_from_slice(&data);
        // Read back an unaligned window around it (reads see neighbours too).
        let from = lba.saturating_sub(rng.below(9) as usize);
        let to = (lba + n + rng.below(9) as usize).min(REGION);
        let to = to.min(from + 256);
        let mut back = vec![0u8; (to - from) * BS];
        c.read(0, &ns, Lba(from as u64), &mut back).unwrap();
        assert!(
            back == shadow[from * BS..to * BS],
            "{n} blocks written at {lba}: window {from}..{to} differs"
        );
    }
    // The whole region from another host's controller: the data is on the array.
    let mut c2 = connect(&rig, 2);
    let ns2 = c2.namespace(Nsid(1)).unwrap();
    let mut all = vec![0u8; REGION * BS];
    c2.read(0, &ns2, Lba(0), &mut all).unwrap();
    for (b, (got, want)) in all.chunks(BS).zip(shadow.chunks(BS)).enumerate() {
        assert!(got == want, "block {b} differs");
    }
    // The last blocks of the namespace, and one past it refused by the initiator's check.
    let tail = pattern(7, 3 * BS);
    c.write(0, &ns, Lba(ns.blocks - 3), &tail).unwrap();
    let mut back = vec![0u8; 3 * BS];
    c2.read(0, &ns2, Lba(ns.blocks - 3), &mut back).unwrap();
    assert!(back == tail);
    assert_eq!(copied(&rig.target), 0, "payload bytes copied");
    c2.shutdown().unwrap();
    c.shutdown().unwrap();
}

#[test]
fn in_capsule_and_keyed_writes_are_both_served() {
    let rig = default_rig();
    let mut c = connect(&rig, 1);
    let ns = c.namespace(Nsid(1)).unwrap();
    let icm = c.in_capsule_max() as usize;
    assert_eq!(icm, 8192);
    let q = &mut c.io[0];
    assert_eq!(
        q.in_capsule_max() as usize,
        icm,
        "the I/O queue sends ≤ 8 KiB in the capsule"
    );
    // 1 and 2 blocks travel in the capsule, 3 and more by RDMA READ of a keyed SGL.
    for (i, blocks) in [1usize, 2, 3, 4, 64].into_iter().enumerate() {
        let lba = 4000 + 100 * i as u64 + 1;
        let data = pattern(50 + i as u64, blocks * BS);
        let tag = q.alloc().unwrap();
        q.write_data(tag, 0, &data).unwrap();
        hio::submit_rw(q, tag, IoOp::Write, &ns, Lba(lba), blocks as u32).unwrap();
        q.wait(tag).unwrap();
        let mut back = vec![0u8; data.len()];
        hio::read(q, &ns, Lba(lba), &mut back, &mut || Ok(())).unwrap();
        assert!(back == data, "{blocks} blocks");
    }
    assert_eq!(copied(&rig.target), 0);
    c.shutdown().unwrap();
}

#[test]
fn write_zeroes_deallocate_flush_and_fua() {
    let rig = default_rig();
    let mut c = connect(&rig, 1);
    let ns = c.namespace(Nsid(1)).unwrap();
    assert_ne!(
        ns.id.dlfeat & 0x7,
        0,
        "deallocated blocks read as zeroes (DLFEAT)"
    );
    let base = 3000u64;
    let data = pattern(9, 200 * BS);
    c.write(0, &ns, Lba(base), &data).unwrap();

    // Write Zeroes over [base+10, base+40), unaligned to the 48-block stripe.
    c.write_zeroes(0, &ns, Lba(base + 10), 30, false).unwrap();
    // Write Zeroes with the deallocate bit over [base+100, base+103).
    c.write_zeroes(0, &ns, Lba(base + 100), 3, true).unwrap();
    // DSM deallocate of two ranges: [base+50, base+51) and [base+150, base+197).
    let ranges = [
        DsmRange {
            attributes: 0,
            nlb: 1,
            slba: base + 50,
        },
        DsmRange {
            attributes: 0,
            nlb: 47,
            slba: base + 150,
        },
    ];
    c.dataset_management(0, Nsid(1), &ranges, true).unwrap();
    c.flush(0, Nsid(1)).unwrap();

    let mut want = data.clone();
    for (from, n) in [(10usize, 30usize), (100, 3), (50, 1), (150, 47)] {
        want[from * BS..(from + n) * BS].fill(0);
    }
    let mut back = vec![0u8; data.len()];
    c.read(0, &ns, Lba(base), &mut back).unwrap();
    for (b, (got, w)) in back.chunks(BS).zip(want.chunks(BS)).enumerate() {
        assert!(got == w, "block base+{b}");
    }

    // FUA write (keyed and in-capsule), then Flush of every namespace (NSID FFFFFFFFh).
    let q = &mut c.io[0];
    for (i, blocks) in [1u32, 17].into_iter().enumerate() {
        let lba = base + 400 + 40 * i as u64;
        let payload = pattern(77 + i as u64, blocks as usize * BS);
        let sqe = IoCommand::Write(ReadWrite {
            cid: 0,
            nsid: 1,
            sgl: SglDescriptor::Keyed {
                address: 0,
                length: 0,
                key: 0,
                invalidate: false,
            },
            slba: lba,
            nlb: blocks,
            fua: true,
            limited_retry: false,
            prinfo: 0,
            dtype: 0,
            dsm: 0,
            dspec: 0,
            reftag: 0,
            apptag: 0,
        })
        .to_sqe()
        .unwrap();
        q.execute(
            sqe,
            Xfer::FromHost(payload.len() as u32),
            "Write FUA",
            &payload,
            &mut [],
        )
        .unwrap();
        let mut back = vec![0u8; payload.len()];
        hio::read(q, &ns, Lba(lba), &mut back, &mut || Ok(())).unwrap();
        assert!(back == payload, "FUA write of {blocks} blocks");
    }
    c.flush(0, Nsid(0xFFFF_FFFF)).unwrap();
    assert_eq!(copied(&rig.target), 0);
    c.shutdown().unwrap();
}

#[test]
fn smart_log_counts_this_controllers_io() {
    use raidline_proto::log::{LogPageId, SmartLog};
    let rig = default_rig();
    let mut c = connect(&rig, 1);
    let mut other = connect(&rig, 2);
    let ns = c.namespace(Nsid(1)).unwrap();
    let (mut wbytes, mut rbytes, mut w, mut r) = (0u128, 0u128, 0u128, 0u128);
    for (i, blocks) in [1usize, 7, 64, 256, 200, 3].into_iter().enumerate() {
        let data = pattern(i as u64, blocks * BS);
        c.write(0, &ns, Lba(10 + 300 * i as u64), &data).unwrap();
        (wbytes, w) = (wbytes + data.len() as u128, w + 1);
        if i % 2 == 0 {
            let mut back = vec![0u8; data.len()];
            c.read(0, &ns, Lba(10 + 300 * i as u64), &mut back).unwrap();
            (rbytes, r) = (rbytes + back.len() as u128, r + 1);
        }
    }
    // Another controller's I/O is not this controller's.
    other
        .write(0, &ns, Lba(5000), &pattern(9, 64 * BS))
        .unwrap();
    let b = c
        .get_log_page(LogPageId::SMART, 0xFFFF_FFFF, 0, 512)
        .unwrap();
    let s = SmartLog::parse(&b).unwrap();
    assert_eq!(s.host_write_commands, w);
    assert_eq!(s.host_read_commands, r);
    assert_eq!(s.data_units_written, wbytes.div_ceil(512_000));
    assert_eq!(s.data_units_read, rbytes.div_ceil(512_000));
    assert_eq!(s.critical_warning, 0, "healthy array");
    other.shutdown().unwrap();
    c.shutdown().unwrap();
}

#[test]
fn io_queue_disconnect_frees_the_queue_id() {
    use raidline_proto::fabrics::{ConnectData, Disconnect};
    use raidline_proto::features::{FeatureId, NumberOfQueues};
    use raidline_proto::text::Nqn;
    let rig = default_rig();
    let mut o = options(1);
    o.io_queues = 0;
    o.kato = Duration::from_secs(30);
    let mut c = connect_with(&rig, 1, o).unwrap();
    c.set_features(
        FeatureId::NUMBER_OF_QUEUES,
        NumberOfQueues::from_counts(1, 1).unwrap().to_dword(),
    )
    .unwrap();
    let cntlid = c.cntlid();
    let data = ConnectData {
        hostid: host(1).hostid,
        cntlid,
        subnqn: Nqn::new(SUBNQN).unwrap(),
        hostnqn: host(1).hostnqn,
    };
    let conns = |rig: &Rig| {
        let ctrls = rig.target.shared().controllers.lock().unwrap();
        let mut q: Vec<u16> = ctrls[&cntlid].conns.iter().map(|(q, _, _)| *q).collect();
        q.sort_unstable();
        q
    };
    let addr = rig.target.local_addrs()[0];
    let mut q = RawQueue::connect(&rig.net, "raw-a", addr, 1, 8, cntlid).unwrap();
    assert!(q.fabrics_connect(0, &data).unwrap().status.is_success());
    assert_eq!(conns(&rig), vec![0, 1]);
    let cqe = q
        .exec(Disconnect { cid: 0, recfmt: 0 }.to_sqe(), &[])
        .unwrap();
    assert!(cqe.status.is_success(), "Disconnect: {:?}", cqe.status);
    assert!(
        eventually(Duration::from_secs(3), || conns(&rig) == vec![0]),
        "queue 1 still listed: {:?}",
        conns(&rig)
    );
    let sgl = q.keyed(0, 4096);
    let mut read = IoCommand::Read(ReadWrite {
        cid: 0,
        nsid: 1,
        sgl,
        slba: 0,
        nlb: 1,
        fua: false,
        limited_retry: false,
        prinfo: 0,
        dtype: 0,
        dsm: 0,
        dspec: 0,
        reftag: 0,
        apptag: 0,
    })
    .to_sqe()
    .unwrap();
    assert!(
        q.exec(read, &[]).is_err(),
        "a disconnected queue answers nothing"
    );
    drop(q);
    // Queue id 1 is free again; the controller never noticed.
    let mut q = RawQueue::connect(&rig.net, "raw-b", addr, 1, 8, cntlid).unwrap();
    let cqe = q.fabrics_connect(0, &data).unwrap();
    assert!(cqe.status.is_success(), "reconnect qid 1: {:?}", cqe.status);
    read.set_sgl1(&q.keyed(0, 4096)).unwrap();
    assert!(q.exec(read, &[]).unwrap().status.is_success());
    assert_eq!(conns(&rig), vec![0, 1]);
    c.identify_controller().unwrap();
    c.shutdown().unwrap();
}

#[test]
fn large_write_zeroes_and_256_range_deallocate() {
    let rig = default_rig();
    let mut c = connect(&rig, 1);
    let ns = c.namespace(Nsid(1)).unwrap();
    let head = pattern(21, 1024 * BS);
    c.write(0, &ns, Lba(0), &head).unwrap();
    let after = pattern(22, 8 * BS);
    c.write(0, &ns, Lba(2048), &after).unwrap();
    // One Write Zeroes of 2048 blocks (8 MiB: eight times the largest pool buffer).
    c.write_zeroes(0, &ns, Lba(0), 2048, false).unwrap();
    let mut back = vec![0xFFu8; 1024 * BS];
    c.read(0, &ns, Lba(0), &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0), "not zeroed");
    let mut back = vec![0u8; 8 * BS];
    c.read(0, &ns, Lba(2048), &mut back).unwrap();
    assert!(back == after, "zeroed past the range");

    // 256 ranges of 2 blocks, every 4 blocks over [0, 1024).
    c.write(0, &ns, Lba(0), &head).unwrap();
    let ranges: Vec<DsmRange> = (0..256u64)
        .map(|k| DsmRange {
            attributes: 0,
            nlb: 2,
            slba: 4 * k,
        })
        .collect();
    c.dataset_management(0, Nsid(1), &ranges, true).unwrap();
    let mut back = vec![0u8; 1024 * BS];
    c.read(0, &ns, Lba(0), &mut back).unwrap();
    for b in 0..1024usize {
        let got = &back[b * BS..(b + 1) * BS];
        if b % 4 < 2 {
            assert!(got.iter().all(|&x| x == 0), "block {b} not deallocated");
        } else {
            assert!(got == &head[b * BS..(b + 1) * BS], "block {b} changed");
        }
    }
    assert_eq!(copied(&rig.target), 0);
    c.shutdown().unwrap();
}

#[test]
fn dsm_range_list_in_a_whole_page_as_linux_sends_it() {
    use raidline_proto::fabrics::ConnectData;
    use raidline_proto::features::{FeatureId, NumberOfQueues};
    use raidline_proto::io::DatasetManagement;
    use raidline_proto::text::Nqn;
    let rig = default_rig();
    let mut o = options(1);
    o.io_queues = 0;
    o.kato = Duration::from_secs(30);
    let mut c = connect_with(&rig, 1, o).unwrap();
    c.set_features(
        FeatureId::NUMBER_OF_QUEUES,
        NumberOfQueues::from_counts(1, 1).unwrap().to_dword(),
    )
    .unwrap();
    let cntlid = c.cntlid();
    // The I/O queue by hand: Linux puts the range list in a 4 KiB page and says so in the SGL.
    let mut q = RawQueue::connect(
        &rig.net,
        "raw-dsm",
        rig.target.local_addrs()[0],
        1,
        8,
        cntlid,
    )
    .unwrap();
    let cqe = q
        .fabrics_connect(
            0,
            &ConnectData {
                hostid: host(1).hostid,
                cntlid,
                subnqn: Nqn::new(SUBNQN).unwrap(),
                hostnqn: host(1).hostnqn,
            },
        )
        .unwrap();
    assert!(cqe.status.is_success(), "{:?}", cqe.status);
    let rw = |write: bool, q: &RawQueue| {
        let rw = ReadWrite {
            cid: 0,
            nsid: 1,
            sgl: q.keyed(0, 16 * BS as u32),
            slba: 640,
            nlb: 16,
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
        cmd.to_sqe().unwrap()
    };
    let data = pattern(31, 16 * BS);
    q.write_data(0, &data);
    let sqe = rw(true, &q);
    assert!(q.exec(sqe, &[]).unwrap().status.is_success());
    let mut page = vec![0u8; 4096];
    let list = DsmRange::list_to_bytes(&[DsmRange {
        attributes: 0,
        nlb: 4,
        slba: 644,
    }]);
    page[..list.len()].copy_from_slice(&list);
    q.write_data(0, &page);
    let sqe = IoCommand::DatasetManagement(DatasetManagement {
        cid: 0,
        nsid: 1,
        sgl: q.keyed(0, 4096),
        ranges: 1,
        idr: false,
        idw: false,
        deallocate: true,
    })
    .to_sqe()
    .unwrap();
    let cqe = q.exec(sqe, &[]).unwrap();
    assert!(
        cqe.status.is_success(),
        "DSM with a 4 KiB list: {:?}",
        cqe.status
    );
    let sqe = rw(false, &q);
    assert!(q.exec(sqe, &[]).unwrap().status.is_success());
    let back = q.read_data(0, 16 * BS);
    let mut want = data.clone();
    want[4 * BS..8 * BS].fill(0);
    for (b, (got, w)) in back.chunks(BS).zip(want.chunks(BS)).enumerate() {
        assert!(got == w, "block 640+{b}");
    }
    c.shutdown().unwrap();
}
