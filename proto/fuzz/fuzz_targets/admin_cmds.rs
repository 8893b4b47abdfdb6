//! Admin commands, feature values and AEN completions: parse any bytes; whatever parses
//! rebuilds to an equal value, and log page slicing never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidline_proto::admin::{
    Abort, AdminCommand, AsyncEventRequest, GetFeatures, GetLogPage, Identify, KeepAlive,
    SetFeatures,
};
use raidline_proto::aen::AsyncEvent;
use raidline_proto::features::{HostBehavior, NumberOfQueues, Timestamp};
use raidline_proto::Sqe;

fuzz_target!(|data: &[u8]| {
    let Some(head) = data.get(..64) else { return };
    let rest = &data[64..];
    let sqe = Sqe::parse(head).unwrap();
    if let Ok(c) = AdminCommand::parse(&sqe) {
        assert_eq!(c.cid(), sqe.cid());
        if let Some(out) = c.to_sqe() {
            assert_eq!(AdminCommand::parse(&out.unwrap()).unwrap(), c);
        }
    }
    if let Ok(c) = Identify::parse(&sqe) {
        assert_eq!(Identify::parse(&c.to_sqe().unwrap()).unwrap(), c);
    }
    if let Ok(c) = GetLogPage::parse(&sqe) {
        assert_eq!(GetLogPage::parse(&c.to_sqe().unwrap()).unwrap(), c);
        if let Ok(s) = c.slice(rest) {
            assert!(s.len() as u64 <= c.byte_len());
        }
    }
    if let Ok(c) = GetFeatures::parse(&sqe) {
        assert_eq!(GetFeatures::parse(&c.to_sqe().unwrap()).unwrap(), c);
    }
    if let Ok(c) = SetFeatures::parse(&sqe) {
        assert_eq!(SetFeatures::parse(&c.to_sqe().unwrap()).unwrap(), c);
        if let Ok(q) = NumberOfQueues::from_dword(c.cdw11) {
            assert_eq!(q.to_dword(), c.cdw11);
        }
    }
    if let Ok(c) = KeepAlive::parse(&sqe) {
        assert_eq!(c.to_sqe().cid(), sqe.cid());
    }
    if let Ok(c) = AsyncEventRequest::parse(&sqe) {
        assert_eq!(c.to_sqe().cid(), sqe.cid());
    }
    if let Ok(c) = Abort::parse(&sqe) {
        assert_eq!(Abort::parse(&c.to_sqe()).unwrap(), c);
    }
    if let Ok(e) = AsyncEvent::from_dw0(sqe.cdw(10)) {
        assert_eq!(e.to_dw0(), sqe.cdw(10));
    }
    if let Ok(t) = Timestamp::parse(&head[..8]) {
        assert_eq!(Timestamp::parse(&t.to_bytes().unwrap()).unwrap(), t);
    }
    let mut hb = rest.to_vec();
    hb.resize(HostBehavior::LEN, 0);
    if let Ok(h) = HostBehavior::parse(&hb) {
        assert_eq!(HostBehavior::parse(&h.to_bytes()).unwrap(), h);
    }
});
