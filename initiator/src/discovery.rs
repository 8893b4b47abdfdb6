//! Discovery: connect to a discovery controller and read its log page (Get Log Page 70h) the
//! way nvme-cli/libnvme does — header first, then the whole page, then the header again; when
//! the generation counter moved in between, start over (at most [`MAX_RETRIES`] times).
//!
//! Invariants: a returned log is one consistent generation (its genctr was seen before and after
//! the read) with exactly NUMREC entries; a hostile NUMREC (more than [`MAX_RECORDS`]) is refused
//! before any allocation.

use std::net::SocketAddr;

use raidline_fabric::Fabric;
use raidline_proto::log::LogPageId;
use raidline_proto::log::{
    DiscoveryLog, DiscoveryLogHeader, DISCOVERY_ENTRY_LEN, DISCOVERY_HEADER_LEN,
};

use crate::controller::{Controller, ControllerOptions};
use crate::error::Error;

/// Attempts when the generation counter keeps changing.
pub const MAX_RETRIES: usize = 10;
/// Most records accepted in one discovery log.
pub const MAX_RECORDS: u64 = 4096;

/// Reads the discovery log of a connected discovery controller.
pub fn read_discovery_log<F: Fabric>(ctrl: &mut Controller<F>) -> Result<DiscoveryLog, Error> {
    for _ in 0..MAX_RETRIES {
        let h = read_header(ctrl)?;
        if h.numrec > MAX_RECORDS {
            return Err(Error::Protocol(format!(
                "discovery log announces {} records (at most {MAX_RECORDS} accepted)",
                h.numrec
            )));
        }
        let len = DISCOVERY_HEADER_LEN + DISCOVERY_ENTRY_LEN * h.numrec as usize;
        let page = ctrl.get_log_page(LogPageId::DISCOVERY, 0, 0, len)?;
        let partial = DiscoveryLog::parse_partial(&page)?;
        let again = read_header(ctrl)?;
        if partial.header.genctr == h.genctr
            && again.genctr == h.genctr
            && partial.header.numrec == h.numrec
            && partial.is_complete()
        {
            return Ok(DiscoveryLog {
                genctr: h.genctr,
                entries: partial.entries,
            });
        }
    }
    Err(Error::Protocol(format!(
        "discovery log generation kept changing over {MAX_RETRIES} reads"
    )))
}

fn read_header<F: Fabric>(ctrl: &mut Controller<F>) -> Result<DiscoveryLogHeader, Error> {
    let b = ctrl.get_log_page(LogPageId::DISCOVERY, 0, 0, DISCOVERY_HEADER_LEN)?;
    Ok(DiscoveryLogHeader::parse(&b)?)
}

/// Connects to the discovery controller at `addr`, reads its log, and disconnects.
pub fn discover<F: Fabric>(
    fabric: F,
    addr: SocketAddr,
    opts: ControllerOptions,
) -> Result<DiscoveryLog, Error> {
    let mut ctrl = Controller::connect(fabric, addr, opts)?;
    let log = read_discovery_log(&mut ctrl);
    // The log is what was asked for; a failed shutdown of a discovery controller is not worth
    // failing it over (Linux does not even shut discovery controllers down).
    let _ = ctrl.shutdown();
    log
}
