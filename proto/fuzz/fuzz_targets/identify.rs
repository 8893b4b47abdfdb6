//! Identify data structures: parse any bytes (as given, and zero-padded or cut to 4096 so the
//! parsers past the length check are reached); whatever parses rebuilds to an equal value, and
//! structures that keep every byte rebuild to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidline_proto::identify::{
    ActiveNsList, IdentifyController, IdentifyNamespace, NsIdDescriptorList, IDENTIFY_DATA_LEN,
};

fn check(b: &[u8]) {
    if let Ok(id) = IdentifyController::parse(b) {
        let out = id.to_bytes().unwrap();
        assert_eq!(IdentifyController::parse(&out).unwrap(), id);
    }
    if let Ok(ns) = IdentifyNamespace::parse(b) {
        assert_eq!(IdentifyNamespace::parse(&ns.to_bytes()).unwrap(), ns);
    }
    if let Ok(l) = ActiveNsList::parse(b) {
        assert_eq!(l.to_bytes().unwrap(), b);
    }
    if let Ok(l) = NsIdDescriptorList::parse(b) {
        let out = l.to_bytes().unwrap();
        assert_eq!(NsIdDescriptorList::parse(&out).unwrap(), l);
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut b = data.to_vec();
    b.resize(IDENTIFY_DATA_LEN, 0);
    check(&b);
});
