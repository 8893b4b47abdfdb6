//! SQE, CQE, SGL descriptor and status field: parse any bytes; whatever parses re-encodes to the
//! same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidline_proto::{Cqe, SglDescriptor, Sqe, Status};

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = Sqe::parse(data) {
        assert_eq!(&s.as_bytes()[..], data);
        let _ = s.sgl1();
    }
    if let Ok(c) = Cqe::parse(data) {
        assert_eq!(&c.to_bytes()[..], data);
    }
    if let Ok(d) = SglDescriptor::parse(data) {
        assert_eq!(&d.to_bytes().unwrap()[..], data);
    }
    if data.len() >= 2 {
        let v = u16::from_le_bytes([data[0], data[1]]) & 0x7FFF;
        assert_eq!(Status::from_field(v).to_field(), v);
    }
});
