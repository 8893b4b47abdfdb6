//! Admin command execution: Identify, Get Log Page, Get/Set Features, Keep Alive,
//! Asynchronous Event Request, Abort.
//!
//! Data is small here (≤ 4 KiB per command, plus the discovery log), so it travels as owned
//! bytes; the zero-copy rule is for I/O payload. The transfer length the host's SGL gives must
//! equal the data the command moves (Linux nvmet's `nvmet_check_transfer_len`), otherwise the
//! answer is *Data SGL Length Invalid*. Discovery controllers accept only what discovery needs
//! (Identify Controller, the discovery log, Keep Alive, KATO and AEC features, AER), as nvmet's
//! `nvmet_parse_discovery_cmd` does.

use std::time::Instant;

use raidline_proto::admin::{AdminCommand, GetFeatures, GetLogPage, Identify, SetFeatures};
use raidline_proto::features::{
    AsyncEventConfig, FeatureCapabilities, FeatureId, FeatureSelect, KeepAliveTimer,
    NumberOfQueues, Timestamp, TimestampOrigin,
};
use raidline_proto::identify::{ActiveNsList, Cns, IDENTIFY_DATA_LEN};
use raidline_proto::log::{
    ChangedNsList, CommandEffects, CommandEffectsLog, DiscoveryLog, FirmwareSlotLog, LogPageId,
    SmartLog,
};
use raidline_proto::{AdminOpcode, IoOpcode, SglDescriptor, Sqe, Status, StatusCode};

use super::{dnr, identify, Controller};
use crate::registry::Served;
use crate::status::for_parse_error;

/// The answer to a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Status.
    pub status: Status,
    /// CQE DW0/DW1.
    pub result: u64,
    /// Controller-to-host data (exactly the SGL's length when non-empty).
    pub data: Vec<u8>,
}

impl Completion {
    /// Success with no result.
    pub fn ok() -> Completion {
        Completion::with_result(0)
    }

    /// Success with a CQE result.
    pub fn with_result(result: u64) -> Completion {
        Completion {
            status: Status::SUCCESS,
            result,
            data: Vec::new(),
        }
    }

    /// Success with data for the host.
    pub fn with_data(data: Vec<u8>) -> Completion {
        Completion {
            status: Status::SUCCESS,
            result: 0,
            data,
        }
    }

    /// A failure.
    pub fn error(status: Status) -> Completion {
        Completion {
            status,
            result: 0,
            data: Vec::new(),
        }
    }
}

/// What became of an admin command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdminOutcome {
    /// Send this completion now.
    Complete(Completion),
    /// An Asynchronous Event Request, parked until an event arrives
    /// ([`Controller::poll_event`]).
    Parked,
}

/// What the daemon provides for one admin command.
#[derive(Clone, Copy, Debug, Default)]
pub struct AdminEnv<'a> {
    /// The discovery log page for this controller's host (discovery controllers only).
    pub discovery: Option<&'a DiscoveryLog>,
    /// Milliseconds since the Unix epoch, for the Timestamp feature before a host sets one.
    pub wall_clock_ms: u64,
}

type Answer = Result<Completion, Status>;

fn sgl_len(sgl: &SglDescriptor) -> u64 {
    u64::from(sgl.length())
}

fn expect_len(sgl: &SglDescriptor, len: u64) -> Result<(), Status> {
    if sgl_len(sgl) == len {
        Ok(())
    } else {
        Err(dnr(StatusCode::DATA_SGL_LENGTH_INVALID))
    }
}

impl Controller {
    /// Executes an admin command. `data_in` is the host-to-controller data the transport has
    /// already fetched (the SGL's length; empty for commands without such data).
    pub fn handle_admin(
        &mut self,
        now: Instant,
        sqe: &Sqe,
        data_in: &[u8],
        env: &AdminEnv<'_>,
    ) -> AdminOutcome {
        // Any admin command shows the host is alive (TBKAS-like behaviour, harmless when the
        // host only relies on Keep Alive).
        self.keep_alive(now);
        if let Err(s) = self.require_ready() {
            return AdminOutcome::Complete(Completion::error(s));
        }
        let cmd = match AdminCommand::parse(sqe) {
            Ok(c) => c,
            Err(e) => return AdminOutcome::Complete(Completion::error(for_parse_error(&e))),
        };
        let discovery = matches!(self.served, Served::Discovery);
        let answer = match cmd {
            AdminCommand::Identify(c) => self.identify(&c),
            AdminCommand::GetLogPage(c) => self.get_log_page(&c, env),
            AdminCommand::GetFeatures(c) => self.get_features(&c, env),
            AdminCommand::SetFeatures(c) => self.set_features(&c, data_in, now),
            AdminCommand::KeepAlive(_) => Ok(Completion::ok()),
            AdminCommand::AsyncEventRequest(c) => {
                if self.aer_slots.len() >= usize::from(self.limits.aer_limit) {
                    Err(dnr(StatusCode::AER_LIMIT_EXCEEDED))
                } else {
                    self.aer_slots.push_back(c.cid);
                    self.match_events();
                    return AdminOutcome::Parked;
                }
            }
            // Abort is best effort; commands here complete quickly. DW0 bit 0 = 1: not aborted.
            AdminCommand::Abort(_) if !discovery => Ok(Completion::with_result(1)),
            _ => Err(dnr(StatusCode::INVALID_OPCODE)),
        };
        AdminOutcome::Complete(answer.unwrap_or_else(Completion::error))
    }

    fn identify(&self, c: &Identify) -> Answer {
        expect_len(&c.sgl, IDENTIFY_DATA_LEN as u64)?;
        let internal = |_| dnr(StatusCode::INTERNAL_ERROR);
        let sub = match &self.served {
            Served::Discovery => {
                if c.cns != Cns::CONTROLLER {
                    return Err(dnr(StatusCode::INVALID_FIELD));
                }
                let id = identify::discovery_controller(self.cntlid, &self.limits, "raidline");
                return Ok(Completion::with_data(id.to_bytes().map_err(internal)?));
            }
            Served::Nvm(s) => s,
        };
        let nn = sub.max_nsid();
        let data = match c.cns {
            Cns::CONTROLLER => identify::nvm_controller(self.cntlid, &self.limits, sub)
                .to_bytes()
                .map_err(internal)?,
            Cns::NAMESPACE => {
                if c.nsid == 0 || c.nsid > nn {
                    return Err(dnr(StatusCode::INVALID_NAMESPACE));
                }
                match sub.namespace(c.nsid) {
                    Some(ns) => identify::namespace(ns).to_bytes(),
                    // A valid but inactive NSID (not configured, or disabled by the operator)
                    // reads as zeroes.
                    None => vec![0; IDENTIFY_DATA_LEN],
                }
            }
            Cns::ACTIVE_NS_LIST => {
                if c.nsid >= 0xFFFF_FFFE {
                    return Err(dnr(StatusCode::INVALID_NAMESPACE));
                }
                ActiveNsList::after(c.nsid, sub.active_namespaces().map(|n| n.nsid))
                    .to_bytes()
                    .map_err(internal)?
            }
            Cns::NS_ID_DESCRIPTORS => {
                let ns = sub
                    .namespace(c.nsid)
                    .ok_or(dnr(StatusCode::INVALID_NAMESPACE))?;
                identify::ns_descriptors(ns).to_bytes().map_err(internal)?
            }
            _ => return Err(dnr(StatusCode::INVALID_FIELD)),
        };
        Ok(Completion::with_data(data))
    }

    fn get_log_page(&mut self, c: &GetLogPage, env: &AdminEnv<'_>) -> Answer {
        expect_len(&c.sgl, c.byte_len())?;
        let internal = |_| dnr(StatusCode::INTERNAL_ERROR);
        let discovery = matches!(self.served, Served::Discovery);
        let page: Vec<u8> = match c.lid {
            LogPageId::DISCOVERY if discovery => env
                .discovery
                .ok_or(dnr(StatusCode::INTERNAL_ERROR))?
                .to_bytes()
                .map_err(internal)?,
            _ if discovery => return Err(dnr(StatusCode::INVALID_FIELD)),
            // One entry (ELPE = 0); no error has been logged with more information (More is
            // never set), so the entry is empty.
            LogPageId::ERROR => vec![0; 64],
            LogPageId::SMART => self.smart_log().to_bytes(),
            LogPageId::FIRMWARE_SLOT => FirmwareSlotLog {
                active_slot: 1,
                next_slot: 0,
                revisions: [identify::FIRMWARE_REVISION, "", "", "", "", "", ""].map(str::to_owned),
            }
            .to_bytes()
            .map_err(internal)?,
            LogPageId::CHANGED_NS_LIST => {
                let list = ChangedNsList::from_ids(self.changed_ns.drain(..));
                list.to_bytes().map_err(internal)?
            }
            LogPageId::COMMAND_EFFECTS => effects_log().to_bytes(),
            _ => return Err(dnr(StatusCode::INVALID_FIELD)),
        };
        let part = c.slice(&page).map_err(|e| for_parse_error(&e))?;
        let mut data = vec![0u8; c.byte_len() as usize];
        data[..part.len()].copy_from_slice(part);
        Ok(Completion::with_data(data))
    }

    fn smart_log(&self) -> SmartLog {
        let s = &self.stats;
        let io = |a: &std::sync::atomic::AtomicU64| {
            u128::from(a.load(std::sync::atomic::Ordering::Relaxed))
        };
        SmartLog {
            critical_warning: s.critical_warning,
            available_spare: 100,
            available_spare_threshold: 10,
            data_units_read: SmartLog::data_units(s.bytes_read + io(&self.io.bytes_read)),
            data_units_written: SmartLog::data_units(s.bytes_written + io(&self.io.bytes_written)),
            host_read_commands: s.read_commands + io(&self.io.read_commands),
            host_write_commands: s.write_commands + io(&self.io.write_commands),
            media_errors: s.media_errors,
            ..SmartLog::default()
        }
    }

    fn supported_aec(&self) -> u32 {
        match self.served {
            Served::Discovery => identify::OAES_DISCOVERY_CHANGE,
            Served::Nvm(_) => {
                identify::OAES_NS_ATTRIBUTE | AsyncEventConfig::SMART_CRITICAL_WARNINGS
            }
        }
    }

    fn queue_limit(&self) -> NumberOfQueues {
        let n = self.limits.max_io_queues.max(1) - 1;
        NumberOfQueues { nsq: n, ncq: n }
    }

    fn get_features(&self, c: &GetFeatures, env: &AdminEnv<'_>) -> Answer {
        let discovery = matches!(self.served, Served::Discovery);
        match c.fid {
            FeatureId::KEEP_ALIVE_TIMER | FeatureId::ASYNC_EVENT_CONFIG => {}
            FeatureId::NUMBER_OF_QUEUES | FeatureId::TIMESTAMP if !discovery => {}
            _ => return Err(dnr(StatusCode::INVALID_FIELD)),
        }
        if c.sel == FeatureSelect::SupportedCapabilities {
            let caps = FeatureCapabilities {
                saveable: false,
                per_namespace: false,
                changeable: true,
            };
            return Ok(Completion::with_result(u64::from(caps.to_dword())));
        }
        let current = c.sel == FeatureSelect::Current;
        Ok(match c.fid {
            FeatureId::KEEP_ALIVE_TIMER => {
                let ms = if current {
                    self.kato.as_millis() as u32
                } else {
                    0
                };
                Completion::with_result(u64::from(KeepAliveTimer { kato_ms: ms }.to_dword()))
            }
            FeatureId::ASYNC_EVENT_CONFIG => {
                Completion::with_result(u64::from(if current { self.aec.0 } else { 0 }))
            }
            FeatureId::NUMBER_OF_QUEUES => {
                let q = self
                    .io_queues_granted
                    .filter(|_| current)
                    .unwrap_or(self.queue_limit());
                Completion::with_result(u64::from(q.to_dword()))
            }
            _ => {
                // Timestamp: the only remaining feature.
                expect_len(&c.sgl, Timestamp::LEN as u64)?;
                let ts = match self.timestamp {
                    Some((ms, at)) => Timestamp {
                        millis: ms.saturating_add(at.elapsed().as_millis() as u64)
                            & Timestamp::MAX_MILLIS,
                        synch: false,
                        origin: TimestampOrigin::SET_BY_HOST,
                    },
                    None => Timestamp {
                        millis: env.wall_clock_ms & Timestamp::MAX_MILLIS,
                        synch: false,
                        origin: TimestampOrigin::RESET,
                    },
                };
                let bytes = ts.to_bytes().map_err(|_| dnr(StatusCode::INTERNAL_ERROR))?;
                Completion::with_data(bytes.to_vec())
            }
        })
    }

    fn set_features(&mut self, c: &SetFeatures, data: &[u8], now: Instant) -> Answer {
        let discovery = matches!(self.served, Served::Discovery);
        match c.fid {
            FeatureId::KEEP_ALIVE_TIMER | FeatureId::ASYNC_EVENT_CONFIG => {}
            FeatureId::NUMBER_OF_QUEUES | FeatureId::TIMESTAMP if !discovery => {}
            _ => return Err(dnr(StatusCode::INVALID_FIELD)),
        }
        if c.save {
            return Err(dnr(StatusCode::FEATURE_NOT_SAVEABLE));
        }
        Ok(match c.fid {
            FeatureId::KEEP_ALIVE_TIMER => {
                let kato = KeepAliveTimer::from_dword(c.cdw11).rounded_to(self.limits.kas_100ms);
                self.kato = std::time::Duration::from_millis(u64::from(kato.kato_ms));
                self.keep_alive_deadline = None;
                self.keep_alive(now);
                Completion::ok()
            }
            FeatureId::ASYNC_EVENT_CONFIG => {
                self.aec = AsyncEventConfig(c.cdw11).masked(self.supported_aec());
                Completion::ok()
            }
            FeatureId::NUMBER_OF_QUEUES => {
                if self.io_queues_granted.is_some() {
                    return Err(dnr(StatusCode::COMMAND_SEQUENCE_ERROR));
                }
                let want = NumberOfQueues::from_dword(c.cdw11).map_err(|e| for_parse_error(&e))?;
                let got = want.grant(self.queue_limit());
                self.io_queues_granted = Some(got);
                Completion::with_result(u64::from(got.to_dword()))
            }
            _ => {
                expect_len(&c.sgl, Timestamp::LEN as u64)?;
                let ts = Timestamp::parse(data).map_err(|e| for_parse_error(&e))?;
                self.timestamp = Some((ts.millis, now));
                Completion::ok()
            }
        })
    }

    /// I/O queues the host may connect (granted by Set Features Number of Queues, or the limit
    /// when the host never asked).
    pub fn io_queue_count(&self) -> u16 {
        self.io_queues_granted.unwrap_or(self.queue_limit()).nsq + 1
    }
}

/// The Commands Supported and Effects log: what this target implements.
fn effects_log() -> CommandEffectsLog {
    let mut log = CommandEffectsLog::default();
    let yes = CommandEffects::supported(CommandEffects::CSUPP);
    let changes = CommandEffects::supported(CommandEffects::CSUPP | CommandEffects::LBCC);
    for op in [
        AdminOpcode::GET_LOG_PAGE,
        AdminOpcode::IDENTIFY,
        AdminOpcode::ABORT,
        AdminOpcode::SET_FEATURES,
        AdminOpcode::GET_FEATURES,
        AdminOpcode::ASYNC_EVENT_REQUEST,
        AdminOpcode::KEEP_ALIVE,
    ] {
        log.admin[usize::from(op.0)] = yes;
    }
    log.io[usize::from(IoOpcode::FLUSH.0)] = yes;
    log.io[usize::from(IoOpcode::READ.0)] = yes;
    for op in [
        IoOpcode::WRITE,
        IoOpcode::WRITE_ZEROES,
        IoOpcode::DATASET_MANAGEMENT,
    ] {
        log.io[usize::from(op.0)] = changes;
    }
    log
}
