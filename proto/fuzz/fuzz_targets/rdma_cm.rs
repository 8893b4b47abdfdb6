//! NVMe/RDMA CM private data: parse any bytes; whatever parses rebuilds equal.
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidline_proto::rdma_cm::{CmAccept, CmReject, CmRequest};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = CmRequest::parse(data) {
        assert_eq!(CmRequest::parse(&r.to_bytes()).unwrap(), r);
        assert_eq!(&r.to_bytes()[..10], &data[..10]);
    }
    if let Ok(a) = CmAccept::parse(data) {
        assert_eq!(CmAccept::parse(&a.to_bytes()).unwrap(), a);
    }
    if let Ok(j) = CmReject::parse(data) {
        assert_eq!(&j.to_bytes()[..], &data[..4]);
    }
});
