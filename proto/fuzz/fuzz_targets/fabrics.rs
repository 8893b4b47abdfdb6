//! Fabrics commands and Connect data: parse any bytes; whatever parses rebuilds to an equal value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidline_proto::fabrics::{
    property::{Cap, Cc, Csts},
    Authentication, Connect, ConnectData, Disconnect, PropertyGet, PropertySet,
};
use raidline_proto::Sqe;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = ConnectData::parse(data) {
        assert_eq!(ConnectData::parse(&d.to_bytes()).unwrap(), d);
    }
    let Some(head) = data.get(..64) else { return };
    let sqe = Sqe::parse(head).unwrap();
    if let Ok(c) = Connect::parse(&sqe) {
        assert_eq!(Connect::parse(&c.to_sqe().unwrap()).unwrap(), c);
    }
    // Value round trips: bytes the parser does not interpret (FUSE/PSDT, the reserved bytes
    // before the data pointer) are written as zero.
    if let Ok(g) = PropertyGet::parse(&sqe) {
        assert_eq!(PropertyGet::parse(&g.to_sqe()).unwrap(), g);
    }
    if let Ok(s) = PropertySet::parse(&sqe) {
        assert_eq!(PropertySet::parse(&s.to_sqe()).unwrap(), s);
        assert_eq!(Cap::from_u64(Cap::from_u64(s.value).to_u64()), Cap::from_u64(s.value));
        let cc = Cc::from_u32(s.value as u32);
        assert_eq!(Cc::from_u32(cc.to_u32()), cc);
        let csts = Csts::from_u32(s.value as u32);
        assert_eq!(Csts::from_u32(csts.to_u32()), csts);
    }
    if let Ok(d) = Disconnect::parse(&sqe) {
        assert_eq!(Disconnect::parse(&d.to_sqe()).unwrap(), d);
    }
    if let Ok(a) = Authentication::parse(&sqe) {
        assert_eq!(Authentication::parse(&a.to_sqe().unwrap()).unwrap(), a);
    }
});
