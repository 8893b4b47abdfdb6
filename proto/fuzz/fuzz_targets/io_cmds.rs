//! NVM I/O commands and DSM range lists: parse any bytes; whatever parses rebuilds equal.
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidline_proto::io::{DsmRange, IoCommand, DSM_RANGE_LEN};
use raidline_proto::Sqe;

fuzz_target!(|data: &[u8]| {
    if let Some(head) = data.get(..64) {
        let sqe = Sqe::parse(head).unwrap();
        if let Ok(cmd) = IoCommand::parse(&sqe) {
            assert_eq!(IoCommand::parse(&cmd.to_sqe().unwrap()).unwrap(), cmd);
        }
    }
    let n = (data.len() / DSM_RANGE_LEN).min(256) as u16;
    if let Ok(ranges) = DsmRange::parse_list(data, n) {
        assert_eq!(DsmRange::list_to_bytes(&ranges), data);
    }
});
