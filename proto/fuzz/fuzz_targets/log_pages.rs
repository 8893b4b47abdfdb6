//! Log pages: parse any bytes (as given, and zero-padded or cut to each page's size); whatever
//! parses rebuilds to an equal value; partial discovery reads never report more entries than
//! the header announces.
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidline_proto::log::{
    AnaLog, ChangedNsList, CommandEffectsLog, DiscoveryEntry, DiscoveryLog, ErrorLogEntry,
    FirmwareSlotLog, SmartLog, DISCOVERY_ENTRY_LEN,
};

fn sized(data: &[u8], len: usize) -> Vec<u8> {
    let mut b = data.to_vec();
    b.resize(len, 0);
    b
}

fuzz_target!(|data: &[u8]| {
    if let Ok(e) = ErrorLogEntry::parse(&sized(data, ErrorLogEntry::LEN)) {
        assert_eq!(ErrorLogEntry::parse(&e.to_bytes()).unwrap(), e);
    }
    if let Ok(s) = SmartLog::parse(&sized(data, SmartLog::LEN)) {
        assert_eq!(SmartLog::parse(&s.to_bytes()).unwrap(), s);
    }
    if let Ok(f) = FirmwareSlotLog::parse(&sized(data, FirmwareSlotLog::LEN)) {
        assert_eq!(FirmwareSlotLog::parse(&f.to_bytes().unwrap()).unwrap(), f);
    }
    if let Ok(l) = CommandEffectsLog::parse(&sized(data, CommandEffectsLog::LEN)) {
        assert_eq!(CommandEffectsLog::parse(&l.to_bytes()).unwrap(), l);
    }
    let page = sized(data, ChangedNsList::LEN);
    if let Ok(l) = ChangedNsList::parse(&page) {
        assert_eq!(l.to_bytes().unwrap(), page);
    }
    if let Ok((log, used)) = AnaLog::parse_prefix(data) {
        assert!(used <= data.len());
        let out = log.to_bytes().unwrap();
        assert_eq!(out.len(), used);
        assert_eq!(AnaLog::parse(&out).unwrap(), log);
    }
    if let Ok(e) = DiscoveryEntry::parse(&sized(data, DISCOVERY_ENTRY_LEN)) {
        assert_eq!(DiscoveryEntry::parse(&e.to_bytes().unwrap()).unwrap(), e);
    }
    if let Ok(p) = DiscoveryLog::parse_partial(data) {
        assert!(p.entries.len() as u64 <= p.header.numrec);
        let whole = DiscoveryLog {
            genctr: p.header.genctr,
            entries: p.entries.clone(),
        };
        assert_eq!(DiscoveryLog::parse(&whole.to_bytes().unwrap()).unwrap(), whole);
    }
    if let Ok(log) = DiscoveryLog::parse(data) {
        assert_eq!(DiscoveryLog::parse(&log.to_bytes().unwrap()).unwrap(), log);
    }
});
