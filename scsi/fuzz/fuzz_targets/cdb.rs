//! CDBs and the block-command core: any bytes parse to a command or a sense; whatever parses
//! runs against a logical unit without panicking, and its data-out parsers take any bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidline_scsi::cdb::Command;
use raidline_scsi::sbc::{LogicalUnit, Outcome, UnmapLimits};
use raidline_scsi::sense::Sense;

fuzz_target!(|data: &[u8]| {
    let (cdb, rest) = data.split_at(data.len().min(16));
    let lu = LogicalUnit {
        block_size: 512,
        blocks: 1 << 20,
        blocks_per_physical_exp: 3,
        vendor: *b"RAIDLINE",
        product: *b"fuzz            ",
        revision: *b"0.1 ",
        serial: "F".into(),
        eui128: [1; 16],
        target_port: Some(("iqn.2026-12.org.raidline:fuzz,t,0x0001".into(), 1)),
        write_cache: rest.first().is_some_and(|b| b & 1 != 0),
        read_only: rest.first().is_some_and(|b| b & 2 != 0),
        max_transfer_blocks: 2048,
        optimal_transfer_blocks: 384,
        optimal_granularity_blocks: 128,
        unmap: rest.first().is_some_and(|b| b & 4 == 0).then_some(UnmapLimits {
            max_blocks: 1 << 16,
            max_descriptors: 8,
            granularity: 8,
            reads_zero: true,
        }),
        ready: rest.first().is_none_or(|b| b & 8 == 0),
    };
    let outcome = match Command::parse(cdb) {
        Ok(cmd) => {
            let o = lu.execute(&cmd);
            if let Outcome::DataIn(d) = &o {
                assert!(d.len() as u64 <= cmd.data_in_len(lu.block_size));
            }
            o
        }
        Err(s) => Outcome::Check(s),
    };
    if let Outcome::Check(s) = outcome {
        assert_eq!(Sense::parse(&s.to_bytes()), Some(s));
    }
    let _ = lu.unmap_list(rest);
    let _ = lu.write_same(0, 1, true, rest);
});
