//! iSER header, RDMA CM private data and SEND splitting: any bytes parse or fail, never
//! panic; whatever parses rebuilds equal.
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidline_scsi::iser::{build_send, split_send, CmPrivateData, IserHeader, ISER_HDR_LEN};

fuzz_target!(|data: &[u8]| {
    if let Some(h) = data.get(..ISER_HDR_LEN) {
        if let Ok(hdr) = IserHeader::parse(h) {
            assert_eq!(IserHeader::parse(&hdr.to_bytes()).unwrap(), hdr);
        }
    }
    let _ = IserHeader::parse(data);
    let cm = CmPrivateData::parse(data);
    assert_eq!(CmPrivateData::parse(&cm.to_bytes()), cm);
    if let Some(&f) = data.first() {
        assert_eq!(cm.flags, f);
    }
    if let Ok(p) = split_send(data, 1 << 24) {
        assert_eq!(p.data.len() as u32, p.bhs.data_segment_len());
        let rebuilt = build_send(&p.header, p.bhs.as_bytes(), p.ahs, p.data);
        let q = split_send(&rebuilt, 1 << 24).unwrap();
        assert_eq!(q, p);
    }
});
