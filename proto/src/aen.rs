//! Asynchronous event notifications: the completion DW0 of an Asynchronous Event Request
//! (Base §5.2, Figures 150–155; Linux `NVME_AER_*`).
//!
//! DW0 bits 2:0 give the event type, bits 15:8 the event information (whose meaning depends on
//! the type), bits 23:16 the log page the host reads to learn more (and, for most events, to
//! re-arm the event: the controller masks the event until that page is read with RAE clear).
//! Bits 7:3 and 31:24 are reserved; [`AsyncEvent::from_dw0`] rejects them and the reserved
//! types 3–5, so every accepted DW0 re-encodes to itself.

use crate::error::ParseError;
use crate::features::AsyncEventConfig;
use crate::log::{critical_warning, LogPageId};

code_newtype! {
    /// Asynchronous Event Type (DW0 bits 2:0; Base Figure 151).
    pub struct AsyncEventType(u8) {
        /// Error status.
        ERROR = 0x0,
        /// SMART / Health status.
        SMART = 0x1,
        /// Notice.
        NOTICE = 0x2,
        /// I/O Command Set specific status.
        IO_COMMAND_SET = 0x6,
        /// Vendor specific.
        VENDOR = 0x7,
    }
}

code_newtype! {
    /// Event information for [`AsyncEventType::ERROR`] (Base Figure 152).
    pub struct ErrorEvent(u8) {
        /// Write to invalid doorbell register.
        INVALID_DOORBELL_REGISTER = 0x00,
        /// Invalid doorbell write value.
        INVALID_DOORBELL_VALUE = 0x01,
        /// Diagnostic failure.
        DIAGNOSTIC_FAILURE = 0x02,
        /// Persistent internal error.
        PERSISTENT_INTERNAL_ERROR = 0x03,
        /// Transient internal error.
        TRANSIENT_INTERNAL_ERROR = 0x04,
        /// Firmware image load error.
        FIRMWARE_IMAGE_LOAD = 0x05,
    }
}

code_newtype! {
    /// Event information for [`AsyncEventType::SMART`] (Base Figure 153).
    pub struct SmartEvent(u8) {
        /// NVM subsystem reliability degraded (e.g. a RAID member failed).
        RELIABILITY = 0x00,
        /// Temperature threshold crossed.
        TEMPERATURE_THRESHOLD = 0x01,
        /// Available spare below threshold.
        SPARE_BELOW_THRESHOLD = 0x02,
    }
}

code_newtype! {
    /// Event information for [`AsyncEventType::NOTICE`] (Base Figure 154).
    pub struct NoticeEvent(u8) {
        /// Namespace attribute changed (read the Changed Namespace List).
        NS_ATTRIBUTE_CHANGED = 0x00,
        /// Firmware activation starting.
        FIRMWARE_ACTIVATION_STARTING = 0x01,
        /// Telemetry log changed.
        TELEMETRY_LOG_CHANGED = 0x02,
        /// Asymmetric namespace access change (read the ANA log).
        ANA_CHANGE = 0x03,
        /// Predictable latency event aggregate log change.
        PREDICTABLE_LATENCY_CHANGE = 0x04,
        /// LBA status information alert.
        LBA_STATUS_ALERT = 0x05,
        /// Endurance group event aggregate log page change.
        ENDURANCE_GROUP_CHANGE = 0x06,
        /// Normal NVM subsystem shutdown (a 2.0 revision after 2.0a).
        NORMAL_SHUTDOWN = 0x07,
        /// Discovery log page change (discovery controllers).
        DISCOVERY_LOG_CHANGE = 0xF0,
    }
}

code_newtype! {
    /// Event information for [`AsyncEventType::IO_COMMAND_SET`] (Base Figure 155).
    pub struct IoCommandSetEvent(u8) {
        /// Reservation log page available.
        RESERVATION_LOG_AVAILABLE = 0x00,
        /// Sanitize operation completed.
        SANITIZE_COMPLETED = 0x01,
        /// Sanitize operation completed with unexpected deallocation.
        SANITIZE_UNEXPECTED_DEALLOCATION = 0x02,
    }
}

/// One asynchronous event, as carried in the Asynchronous Event Request completion's DW0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AsyncEvent {
    /// Event type (bits 2:0); never one of the reserved values 3–5.
    pub event_type: AsyncEventType,
    /// Event information (bits 15:8), interpreted per type.
    pub info: u8,
    /// Log page associated with the event (bits 23:16).
    pub log_page: LogPageId,
}

impl AsyncEvent {
    const WHAT: &'static str = "Asynchronous Event Request completion";

    /// A notice with the log page the specification associates with it (0 for notices that
    /// have none this crate knows).
    pub fn notice(info: NoticeEvent) -> AsyncEvent {
        let log_page = match info {
            NoticeEvent::NS_ATTRIBUTE_CHANGED => LogPageId::CHANGED_NS_LIST,
            NoticeEvent::FIRMWARE_ACTIVATION_STARTING => LogPageId::FIRMWARE_SLOT,
            NoticeEvent::TELEMETRY_LOG_CHANGED => LogPageId::TELEMETRY_CONTROLLER,
            NoticeEvent::ANA_CHANGE => LogPageId::ANA,
            NoticeEvent::PREDICTABLE_LATENCY_CHANGE => LogPageId::PREDICTABLE_LATENCY_AGGREGATE,
            NoticeEvent::LBA_STATUS_ALERT => LogPageId::LBA_STATUS,
            NoticeEvent::ENDURANCE_GROUP_CHANGE => LogPageId::ENDURANCE_GROUP_AGGREGATE,
            NoticeEvent::DISCOVERY_LOG_CHANGE => LogPageId::DISCOVERY,
            _ => LogPageId(0),
        };
        AsyncEvent {
            event_type: AsyncEventType::NOTICE,
            info: info.0,
            log_page,
        }
    }

    /// A SMART / Health event (log page 02h).
    pub fn smart(info: SmartEvent) -> AsyncEvent {
        AsyncEvent {
            event_type: AsyncEventType::SMART,
            info: info.0,
            log_page: LogPageId::SMART,
        }
    }

    /// An error event (log page 01h).
    pub fn error(info: ErrorEvent) -> AsyncEvent {
        AsyncEvent {
            event_type: AsyncEventType::ERROR,
            info: info.0,
            log_page: LogPageId::ERROR,
        }
    }

    /// An I/O command set specific event (reservation notification 80h or sanitize status 81h).
    pub fn io_command_set(info: IoCommandSetEvent) -> AsyncEvent {
        let log_page = match info {
            IoCommandSetEvent::RESERVATION_LOG_AVAILABLE => LogPageId::RESERVATION_NOTIFICATION,
            _ => LogPageId::SANITIZE_STATUS,
        };
        AsyncEvent {
            event_type: AsyncEventType::IO_COMMAND_SET,
            info: info.0,
            log_page,
        }
    }

    /// Decodes DW0. Reserved bits 7:3 and 31:24, and the reserved event types 3–5, are
    /// [`ParseError::InvalidField`] (offset = the DW0 byte holding them).
    pub fn from_dw0(dw0: u32) -> Result<AsyncEvent, ParseError> {
        let bad = |field, offset, value: u32| ParseError::InvalidField {
            what: Self::WHAT,
            field,
            offset,
            value: u64::from(value),
        };
        if dw0 & 0xF8 != 0 {
            return Err(bad("reserved bits 7:3", 0, dw0 & 0xF8));
        }
        if dw0 >> 24 != 0 {
            return Err(bad("reserved bits 31:24", 3, dw0 >> 24));
        }
        let event_type = AsyncEventType((dw0 & 0x7) as u8);
        if !event_type.is_known() {
            return Err(bad("event type", 0, dw0 & 0x7));
        }
        Ok(AsyncEvent {
            event_type,
            info: (dw0 >> 8) as u8,
            log_page: LogPageId((dw0 >> 16) as u8),
        })
    }

    /// Encodes DW0. The event type is cut to its 3 bits.
    pub fn to_dw0(&self) -> u32 {
        u32::from(self.event_type.0 & 0x7)
            | u32::from(self.info) << 8
            | u32::from(self.log_page.0) << 16
    }

    /// The notice, if this is one.
    pub fn as_notice(&self) -> Option<NoticeEvent> {
        (self.event_type == AsyncEventType::NOTICE).then_some(NoticeEvent(self.info))
    }

    /// The SMART event, if this is one.
    pub fn as_smart(&self) -> Option<SmartEvent> {
        (self.event_type == AsyncEventType::SMART).then_some(SmartEvent(self.info))
    }

    /// The error event, if this is one.
    pub fn as_error(&self) -> Option<ErrorEvent> {
        (self.event_type == AsyncEventType::ERROR).then_some(ErrorEvent(self.info))
    }

    /// The Asynchronous Event Configuration bit that enables this event, or `None` when the
    /// event cannot be masked by that feature (error events, vendor events, and events this
    /// crate does not name). A controller reports a maskable event only if its bit is set.
    pub fn config_bit(&self) -> Option<u32> {
        match self.event_type {
            AsyncEventType::SMART => match SmartEvent(self.info) {
                SmartEvent::RELIABILITY => Some(u32::from(critical_warning::RELIABILITY)),
                SmartEvent::TEMPERATURE_THRESHOLD => Some(u32::from(critical_warning::TEMPERATURE)),
                SmartEvent::SPARE_BELOW_THRESHOLD => Some(u32::from(critical_warning::SPARE)),
                _ => None,
            },
            AsyncEventType::NOTICE => match NoticeEvent(self.info) {
                NoticeEvent::NS_ATTRIBUTE_CHANGED => Some(AsyncEventConfig::NS_ATTRIBUTE),
                NoticeEvent::FIRMWARE_ACTIVATION_STARTING => {
                    Some(AsyncEventConfig::FIRMWARE_ACTIVATION)
                }
                NoticeEvent::TELEMETRY_LOG_CHANGED => Some(AsyncEventConfig::TELEMETRY_LOG),
                NoticeEvent::ANA_CHANGE => Some(AsyncEventConfig::ANA_CHANGE),
                NoticeEvent::PREDICTABLE_LATENCY_CHANGE => {
                    Some(AsyncEventConfig::PREDICTABLE_LATENCY)
                }
                NoticeEvent::LBA_STATUS_ALERT => Some(AsyncEventConfig::LBA_STATUS),
                NoticeEvent::ENDURANCE_GROUP_CHANGE => Some(AsyncEventConfig::ENDURANCE_GROUP),
                NoticeEvent::NORMAL_SHUTDOWN => Some(AsyncEventConfig::NORMAL_SHUTDOWN),
                NoticeEvent::DISCOVERY_LOG_CHANGE => Some(AsyncEventConfig::DISCOVERY_LOG_CHANGE),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether a controller configured with `config` reports this event (events without a
    /// configuration bit are always reported).
    pub fn enabled_by(&self, config: AsyncEventConfig) -> bool {
        match self.config_bit() {
            Some(bit) => config.has(bit),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dw0_layout() {
        // What Linux nvmet sends for a namespace change: NVME_AER_TYPE_NOTICE |
        // NVME_AER_NOTICE_NS_CHANGED << 8 | NVME_LOG_CHANGED_NS << 16.
        let ns = AsyncEvent::notice(NoticeEvent::NS_ATTRIBUTE_CHANGED);
        assert_eq!(ns.to_dw0(), 0x0004_0002);
        assert_eq!(AsyncEvent::from_dw0(0x0004_0002).unwrap(), ns);
        let ana = AsyncEvent::notice(NoticeEvent::ANA_CHANGE);
        assert_eq!(ana.to_dw0(), 0x000C_0302);
        let disc = AsyncEvent::notice(NoticeEvent::DISCOVERY_LOG_CHANGE);
        assert_eq!(disc.to_dw0(), 0x0070_F002);
        let smart = AsyncEvent::smart(SmartEvent::RELIABILITY);
        assert_eq!(smart.to_dw0(), 0x0002_0001);
        let err = AsyncEvent::error(ErrorEvent::PERSISTENT_INTERNAL_ERROR);
        assert_eq!(err.to_dw0(), 0x0001_0300);
        let resv = AsyncEvent::io_command_set(IoCommandSetEvent::RESERVATION_LOG_AVAILABLE);
        assert_eq!(resv.to_dw0(), 0x0080_0006);
        assert_eq!(ana.as_notice(), Some(NoticeEvent::ANA_CHANGE));
        assert_eq!(ana.as_smart(), None);
        assert_eq!(smart.as_smart(), Some(SmartEvent::RELIABILITY));
        assert_eq!(err.as_error(), Some(ErrorEvent::PERSISTENT_INTERNAL_ERROR));
    }

    #[test]
    fn rejects_reserved_encodings() {
        assert!(matches!(
            AsyncEvent::from_dw0(0x0004_0003),
            Err(ParseError::InvalidField { offset: 0, .. })
        ));
        assert!(matches!(
            AsyncEvent::from_dw0(0x0004_000A),
            Err(ParseError::InvalidField { offset: 0, .. })
        ));
        assert!(matches!(
            AsyncEvent::from_dw0(0x0104_0002),
            Err(ParseError::InvalidField { offset: 3, .. })
        ));
    }

    #[test]
    fn configuration_masks_events() {
        let config = AsyncEventConfig(AsyncEventConfig::NS_ATTRIBUTE | 0x04);
        assert!(AsyncEvent::notice(NoticeEvent::NS_ATTRIBUTE_CHANGED).enabled_by(config));
        assert!(!AsyncEvent::notice(NoticeEvent::ANA_CHANGE).enabled_by(config));
        assert!(AsyncEvent::smart(SmartEvent::RELIABILITY).enabled_by(config));
        assert!(!AsyncEvent::smart(SmartEvent::TEMPERATURE_THRESHOLD).enabled_by(config));
        assert!(AsyncEvent::error(ErrorEvent::DIAGNOSTIC_FAILURE).enabled_by(config));
        assert_eq!(
            AsyncEvent::notice(NoticeEvent::DISCOVERY_LOG_CHANGE).config_bit(),
            Some(1 << 31)
        );
    }

    proptest! {
        #[test]
        fn dw0_round_trips(dw0: u32) {
            if let Ok(e) = AsyncEvent::from_dw0(dw0) {
                prop_assert_eq!(e.to_dw0(), dw0);
            }
        }

        #[test]
        fn values_round_trip(t in prop_oneof![0u8..3, 6u8..8], info: u8, lid: u8) {
            let e = AsyncEvent { event_type: AsyncEventType(t), info, log_page: LogPageId(lid) };
            prop_assert_eq!(AsyncEvent::from_dw0(e.to_dw0()).unwrap(), e);
        }
    }
}
