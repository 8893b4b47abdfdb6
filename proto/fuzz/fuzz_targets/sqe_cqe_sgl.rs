//! SQE, CQE, SGL descriptor and status field: parse any bytes; whatever parses re-encodes to the
//! same bytes (an SGL descriptor up to the reserved bytes it ignores).
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
        // Reserved bytes 12..15 of unkeyed descriptors are ignored on parse (the Linux host
        // leaves stale bytes there) and written as zero.
        let mut want = data.to_vec();
        if data[15] >> 4 != 4 {
            want[12..15].fill(0);
        }
        assert_eq!(&d.to_bytes().unwrap()[..], &want[..]);
    }
    if data.len() >= 2 {
        let v = u16::from_le_bytes([data[0], data[1]]) & 0x7FFF;
        assert_eq!(Status::from_field(v).to_field(), v);
    }
});
