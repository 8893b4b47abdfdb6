//! Features (Base §5.27.1): identifiers for Get/Set Features and the values of the features a
//! fabrics target implements.
//!
//! - [`FeatureId`] names every feature identifier (Base Figure 317) and keeps unknown ones;
//! - [`FeatureSelect`] is Get Features' SEL (current, default, saved, supported capabilities);
//! - [`NumberOfQueues`] (FID 07h, CDW11 and completion DW0, both 0-based counts),
//!   [`AsyncEventConfig`] (FID 0Bh), [`KeepAliveTimer`] (FID 0Fh) are dword values;
//! - [`Timestamp`] (FID 0Eh, 8 bytes) and [`HostBehavior`] (FID 16h, 512 bytes) travel in the
//!   data buffer and follow the crate's `parse`/`emit` shape.
//!
//! Values the specification calls invalid (65536 queues, a timestamp beyond 48 bits) are
//! rejected; reserved bits of data structures are ignored on parse and zeroed on emit.

use crate::error::{exact, room, ParseError};

code_newtype! {
    /// Feature Identifier (Get/Set Features CDW10 bits 7:0; Base Figure 317).
    pub struct FeatureId(u8) {
        /// Arbitration.
        ARBITRATION = 0x01,
        /// Power Management.
        POWER_MANAGEMENT = 0x02,
        /// LBA Range Type.
        LBA_RANGE_TYPE = 0x03,
        /// Temperature Threshold.
        TEMPERATURE_THRESHOLD = 0x04,
        /// Error Recovery.
        ERROR_RECOVERY = 0x05,
        /// Volatile Write Cache.
        VOLATILE_WRITE_CACHE = 0x06,
        /// Number of Queues.
        NUMBER_OF_QUEUES = 0x07,
        /// Interrupt Coalescing.
        INTERRUPT_COALESCING = 0x08,
        /// Interrupt Vector Configuration.
        INTERRUPT_VECTOR_CONFIG = 0x09,
        /// Write Atomicity Normal.
        WRITE_ATOMICITY = 0x0A,
        /// Asynchronous Event Configuration.
        ASYNC_EVENT_CONFIG = 0x0B,
        /// Autonomous Power State Transition.
        AUTONOMOUS_POWER_STATE = 0x0C,
        /// Host Memory Buffer.
        HOST_MEMORY_BUFFER = 0x0D,
        /// Timestamp.
        TIMESTAMP = 0x0E,
        /// Keep Alive Timer.
        KEEP_ALIVE_TIMER = 0x0F,
        /// Host Controlled Thermal Management.
        HOST_THERMAL_MANAGEMENT = 0x10,
        /// Non-Operational Power State Config.
        NON_OPERATIONAL_POWER_STATE = 0x11,
        /// Read Recovery Level Config.
        READ_RECOVERY_LEVEL = 0x12,
        /// Predictable Latency Mode Config.
        PREDICTABLE_LATENCY_CONFIG = 0x13,
        /// Predictable Latency Mode Window.
        PREDICTABLE_LATENCY_WINDOW = 0x14,
        /// Host Behavior Support.
        HOST_BEHAVIOR = 0x16,
        /// Sanitize Config.
        SANITIZE_CONFIG = 0x17,
        /// Endurance Group Event Configuration.
        ENDURANCE_GROUP_EVENT = 0x18,
        /// I/O Command Set Profile.
        IO_COMMAND_SET_PROFILE = 0x19,
        /// Spinup Control.
        SPINUP_CONTROL = 0x1A,
        /// Enhanced Controller Metadata.
        ENHANCED_CONTROLLER_METADATA = 0x7D,
        /// Controller Metadata.
        CONTROLLER_METADATA = 0x7E,
        /// Namespace Metadata.
        NAMESPACE_METADATA = 0x7F,
        /// Software Progress Marker.
        SOFTWARE_PROGRESS_MARKER = 0x80,
        /// Host Identifier.
        HOST_IDENTIFIER = 0x81,
        /// Reservation Notification Mask.
        RESERVATION_NOTIFICATION_MASK = 0x82,
        /// Reservation Persistence.
        RESERVATION_PERSISTENCE = 0x83,
        /// Namespace Write Protection Config.
        NS_WRITE_PROTECTION = 0x84,
    }
}

/// Get Features Select (SEL, CDW10 bits 10:8; Base Figure 315). Values 4–7 are reserved and
/// rejected by the command parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum FeatureSelect {
    /// The current operating value.
    #[default]
    Current,
    /// The default value.
    Default,
    /// The saved value.
    Saved,
    /// The capabilities of the feature (DW0: bit 0 saveable, 1 per namespace, 2 changeable).
    SupportedCapabilities,
}

impl FeatureSelect {
    /// Decodes the 3-bit field; `None` for the reserved values 4–7.
    pub fn from_bits(v: u8) -> Option<FeatureSelect> {
        match v {
            0 => Some(FeatureSelect::Current),
            1 => Some(FeatureSelect::Default),
            2 => Some(FeatureSelect::Saved),
            3 => Some(FeatureSelect::SupportedCapabilities),
            _ => None,
        }
    }

    /// The 3-bit field value.
    pub fn bits(self) -> u8 {
        match self {
            FeatureSelect::Current => 0,
            FeatureSelect::Default => 1,
            FeatureSelect::Saved => 2,
            FeatureSelect::SupportedCapabilities => 3,
        }
    }
}

/// SQE byte offset of CDW11, where dword feature values sit in Set Features.
const CDW11_OFFSET: usize = 44;

/// Number of Queues (FID 07h; Base §5.27.1.7): in Set Features CDW11 the counts the host asks
/// for, in the completion DW0 the counts allocated. Both are 0-based: 0 means one queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct NumberOfQueues {
    /// Number of I/O submission queues, 0-based (bits 15:0: NSQR requested / NSQA allocated).
    pub nsq: u16,
    /// Number of I/O completion queues, 0-based (bits 31:16: NCQR / NCQA).
    pub ncq: u16,
}

impl NumberOfQueues {
    const WHAT: &'static str = "Number of Queues";

    /// Decodes CDW11 (or DW0). FFFFh in either half (65536 queues) is invalid; the error offset
    /// is the SQE byte of that half of CDW11 (44 or 46).
    pub fn from_dword(v: u32) -> Result<NumberOfQueues, ParseError> {
        let nsq = (v & 0xFFFF) as u16;
        let ncq = (v >> 16) as u16;
        for (value, offset, field) in [(nsq, 0, "nsqr"), (ncq, 2, "ncqr")] {
            if value == 0xFFFF {
                return Err(ParseError::InvalidField {
                    what: Self::WHAT,
                    field,
                    offset: CDW11_OFFSET + offset,
                    value: u64::from(value),
                });
            }
        }
        Ok(NumberOfQueues { nsq, ncq })
    }

    /// Encodes CDW11 (or DW0).
    pub fn to_dword(self) -> u32 {
        u32::from(self.nsq) | u32::from(self.ncq) << 16
    }

    /// The request for `sq` submission and `cq` completion queues (1-based counts, 1..=65535).
    pub fn from_counts(sq: u16, cq: u16) -> Option<NumberOfQueues> {
        Some(NumberOfQueues {
            nsq: sq.checked_sub(1)?,
            ncq: cq.checked_sub(1)?,
        })
    }

    /// Number of submission queues (1-based).
    pub fn sq_count(self) -> u32 {
        u32::from(self.nsq) + 1
    }

    /// Number of completion queues (1-based).
    pub fn cq_count(self) -> u32 {
        u32::from(self.ncq) + 1
    }

    /// What a controller allocating at most `limit` queues of each kind grants: each count is
    /// the smaller of the request and the limit (the controller may grant more than asked, the
    /// Linux host uses the minimum of the two; granting no more keeps both sides in step).
    pub fn grant(self, limit: NumberOfQueues) -> NumberOfQueues {
        NumberOfQueues {
            nsq: self.nsq.min(limit.nsq),
            ncq: self.ncq.min(limit.ncq),
        }
    }
}

/// Asynchronous Event Configuration (FID 0Bh; Base Figure 330): which events the controller
/// reports. Bits this crate does not name are kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AsyncEventConfig(pub u32);

impl core::fmt::Debug for AsyncEventConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "AsyncEventConfig({:#010x})", self.0)
    }
}

impl AsyncEventConfig {
    /// SMART / Health critical warnings (bits 7:0, one per Critical Warning bit).
    pub const SMART_CRITICAL_WARNINGS: u32 = 0xFF;
    /// Namespace Attribute Notices (bit 8).
    pub const NS_ATTRIBUTE: u32 = 1 << 8;
    /// Firmware Activation Notices (bit 9).
    pub const FIRMWARE_ACTIVATION: u32 = 1 << 9;
    /// Telemetry Log Notices (bit 10).
    pub const TELEMETRY_LOG: u32 = 1 << 10;
    /// Asymmetric Namespace Access Change Notices (bit 11).
    pub const ANA_CHANGE: u32 = 1 << 11;
    /// Predictable Latency Event Aggregate Log Change Notices (bit 12).
    pub const PREDICTABLE_LATENCY: u32 = 1 << 12;
    /// LBA Status Information Notices (bit 13).
    pub const LBA_STATUS: u32 = 1 << 13;
    /// Endurance Group Event Aggregate Log Change Notices (bit 14).
    pub const ENDURANCE_GROUP: u32 = 1 << 14;
    /// Normal NVM Subsystem Shutdown Notices (bit 15; defined by a 2.0 revision after 2.0a,
    /// bits 14:8 are in libnvme's `NVME_FEAT_AE_*`).
    pub const NORMAL_SHUTDOWN: u32 = 1 << 15;
    /// Zone Descriptor Changed Notices (bit 27, Zoned Namespace command set).
    pub const ZONE_DESCRIPTOR_CHANGED: u32 = 1 << 27;
    /// Discovery Log Page Change Notification (bit 31, discovery controllers).
    pub const DISCOVERY_LOG_CHANGE: u32 = 1 << 31;

    /// Whether every bit of `flag` is enabled.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }

    /// Only the bits also in `supported` (what a controller keeps from a Set Features, given the
    /// OAES it advertises plus the critical warning bits).
    pub fn masked(self, supported: u32) -> AsyncEventConfig {
        AsyncEventConfig(self.0 & supported)
    }
}

/// Keep Alive Timer (FID 0Fh; Base §5.27.1.15): KATO in milliseconds in CDW11 / DW0; 0 disables
/// the keep-alive timer. The controller rounds it up to a multiple of KAS × 100 ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct KeepAliveTimer {
    /// Keep Alive Timeout in milliseconds.
    pub kato_ms: u32,
}

impl KeepAliveTimer {
    /// Decodes CDW11 (every value is valid).
    pub fn from_dword(v: u32) -> KeepAliveTimer {
        KeepAliveTimer { kato_ms: v }
    }

    /// Encodes CDW11 / DW0.
    pub fn to_dword(self) -> u32 {
        self.kato_ms
    }

    /// KATO rounded up to the controller's granularity `kas` (in 100 ms units, from Identify
    /// Controller); `kas` 0 means no rounding. Saturates at `u32::MAX`.
    pub fn rounded_to(self, kas: u16) -> KeepAliveTimer {
        let unit = u64::from(kas) * 100;
        if unit == 0 || self.kato_ms == 0 {
            return self;
        }
        let ms = u64::from(self.kato_ms).div_ceil(unit) * unit;
        KeepAliveTimer {
            kato_ms: u32::try_from(ms).unwrap_or(u32::MAX),
        }
    }
}

code_newtype! {
    /// Timestamp Origin (Timestamp attributes bits 3:1; Base Figure 342).
    pub struct TimestampOrigin(u8) {
        /// Counting from 0 since the last controller reset.
        RESET = 0x0,
        /// Set by a host with Set Features (a real time).
        SET_BY_HOST = 0x1,
    }
}

/// Timestamp data (FID 0Eh; Base Figure 342): 8 bytes in the data buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Timestamp {
    /// Milliseconds since the Unix epoch (or since reset), 48 bits (bytes 5:0).
    pub millis: u64,
    /// Synch (byte 6 bit 0): the controller may have stopped counting for a while.
    pub synch: bool,
    /// Timestamp Origin (byte 6 bits 3:1).
    pub origin: TimestampOrigin,
}

impl Timestamp {
    /// Size of the data.
    pub const LEN: usize = 8;
    /// Largest timestamp (48 bits).
    pub const MAX_MILLIS: u64 = (1 << 48) - 1;
    const WHAT: &'static str = "Timestamp";

    /// Parses exactly 8 bytes. Byte 6 bits 7:4 and byte 7 are reserved and ignored (hosts send
    /// zero attributes in Set Features).
    pub fn parse(b: &[u8]) -> Result<Timestamp, ParseError> {
        exact(Self::WHAT, b, Self::LEN)?;
        let mut m = [0u8; 8];
        m[..6].copy_from_slice(&b[..6]);
        Ok(Timestamp {
            millis: u64::from_le_bytes(m),
            synch: b[6] & 1 != 0,
            origin: TimestampOrigin((b[6] >> 1) & 0x7),
        })
    }

    /// Writes exactly 8 bytes. A timestamp beyond 48 bits or an origin beyond 3 bits is an
    /// error.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, Self::LEN)?;
        if self.millis > Self::MAX_MILLIS || self.origin.0 > 0x7 {
            return Err(ParseError::InvalidField {
                what: Self::WHAT,
                field: if self.millis > Self::MAX_MILLIS {
                    "timestamp"
                } else {
                    "origin"
                },
                offset: if self.millis > Self::MAX_MILLIS { 0 } else { 6 },
                value: if self.millis > Self::MAX_MILLIS {
                    self.millis
                } else {
                    u64::from(self.origin.0)
                },
            });
        }
        b[..6].copy_from_slice(&self.millis.to_le_bytes()[..6]);
        b[6] = u8::from(self.synch) | self.origin.0 << 1;
        b[7] = 0;
        Ok(())
    }

    /// The data as 8 bytes.
    pub fn to_bytes(&self) -> Result<[u8; 8], ParseError> {
        let mut b = [0u8; 8];
        self.emit(&mut b)?;
        Ok(b)
    }
}

/// Host Behavior Support data (FID 16h; Base Figure 351): 512 bytes in the data buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct HostBehavior {
    /// Advanced Command Retry Enable (byte 0 bit 0): the host honours CRD in completions.
    pub acre: bool,
    /// Extended Telemetry Data Area 4 Supported (byte 1 bit 0).
    pub etdas: bool,
    /// LBA Format Extension Enable (byte 2 bit 0).
    pub lbafee: bool,
}

impl HostBehavior {
    /// Size of the data.
    pub const LEN: usize = 512;
    const WHAT: &'static str = "Host Behavior Support";

    /// Parses exactly 512 bytes. Bits 7:1 of bytes 0–2 and bytes 511:3 are reserved here and
    /// ignored: a host of a later revision (which defines byte 3 onwards) is not refused.
    pub fn parse(b: &[u8]) -> Result<HostBehavior, ParseError> {
        exact(Self::WHAT, b, Self::LEN)?;
        Ok(HostBehavior {
            acre: b[0] & 1 != 0,
            etdas: b[1] & 1 != 0,
            lbafee: b[2] & 1 != 0,
        })
    }

    /// Writes exactly 512 bytes.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), ParseError> {
        room(Self::WHAT, b, Self::LEN)?;
        b.fill(0);
        b[0] = u8::from(self.acre);
        b[1] = u8::from(self.etdas);
        b[2] = u8::from(self.lbafee);
        Ok(())
    }

    /// The data as 512 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::LEN];
        // Cannot fail: the buffer has the exact size.
        let _ = self.emit(&mut b);
        b
    }
}

/// Get Features "supported capabilities" answer (SEL 3, completion DW0 bits 2:0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct FeatureCapabilities {
    /// The feature can be saved (bit 0).
    pub saveable: bool,
    /// The feature is namespace specific (bit 1).
    pub per_namespace: bool,
    /// The feature can be changed (bit 2).
    pub changeable: bool,
}

impl FeatureCapabilities {
    /// Encodes completion DW0.
    pub fn to_dword(self) -> u32 {
        u32::from(self.saveable)
            | u32::from(self.per_namespace) << 1
            | u32::from(self.changeable) << 2
    }

    /// Decodes completion DW0 (bits 31:3 are reserved and ignored).
    pub fn from_dword(v: u32) -> FeatureCapabilities {
        FeatureCapabilities {
            saveable: v & 1 != 0,
            per_namespace: v & 2 != 0,
            changeable: v & 4 != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn number_of_queues_layout() {
        // Linux nvme_set_queue_count(): q_count = (count - 1) | ((count - 1) << 16).
        let q = NumberOfQueues::from_counts(8, 8).unwrap();
        assert_eq!(q.to_dword(), 0x0007_0007);
        assert_eq!(
            NumberOfQueues::from_dword(0x0003_0007).unwrap(),
            NumberOfQueues { nsq: 7, ncq: 3 }
        );
        assert_eq!(q.sq_count(), 8);
        assert_eq!(
            q.grant(NumberOfQueues { nsq: 3, ncq: 15 }),
            NumberOfQueues { nsq: 3, ncq: 7 }
        );
        assert!(matches!(
            NumberOfQueues::from_dword(0x0000_FFFF),
            Err(ParseError::InvalidField { offset: 44, .. })
        ));
        assert!(matches!(
            NumberOfQueues::from_dword(0xFFFF_0000),
            Err(ParseError::InvalidField { offset: 46, .. })
        ));
        assert_eq!(NumberOfQueues::from_counts(0, 1), None);
    }

    #[test]
    fn async_event_config_bits() {
        // Linux nvme_enable_aen(): NS_ATTR | FW_ACT | ANA_CHANGE, masked by OAES.
        let c = AsyncEventConfig(0x0000_0B00);
        assert!(c.has(AsyncEventConfig::NS_ATTRIBUTE | AsyncEventConfig::ANA_CHANGE));
        assert!(c.has(AsyncEventConfig::FIRMWARE_ACTIVATION));
        assert_eq!(AsyncEventConfig::DISCOVERY_LOG_CHANGE, 0x8000_0000);
        assert_eq!(c.masked(0x0000_0100).0, 0x100);
    }

    #[test]
    fn keep_alive_rounding() {
        let k = KeepAliveTimer::from_dword(5000);
        assert_eq!(k.to_dword(), 5000);
        assert_eq!(k.rounded_to(1).kato_ms, 5000);
        assert_eq!(KeepAliveTimer::from_dword(5050).rounded_to(1).kato_ms, 5100);
        assert_eq!(
            KeepAliveTimer::from_dword(1).rounded_to(100).kato_ms,
            10_000
        );
        assert_eq!(KeepAliveTimer::from_dword(0).rounded_to(1).kato_ms, 0);
        assert_eq!(
            KeepAliveTimer::from_dword(u32::MAX).rounded_to(7).kato_ms,
            u32::MAX
        );
    }

    #[test]
    fn timestamp_layout() {
        let b = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x03, 0x00];
        let t = Timestamp::parse(&b).unwrap();
        assert_eq!(
            t,
            Timestamp {
                millis: 0x0605_0403_0201,
                synch: true,
                origin: TimestampOrigin::SET_BY_HOST,
            }
        );
        assert_eq!(t.to_bytes().unwrap(), b);
        let mut reserved = b;
        reserved[6] |= 0xF0;
        reserved[7] = 0xFF;
        assert_eq!(Timestamp::parse(&reserved).unwrap(), t);
        assert!(Timestamp::parse(&b[..7]).is_err());
        assert!(Timestamp::parse(&[0; 9]).is_err());
        let too_big = Timestamp {
            millis: 1 << 48,
            ..t
        };
        assert!(too_big.to_bytes().is_err());
        let bad_origin = Timestamp {
            origin: TimestampOrigin(8),
            ..t
        };
        assert!(matches!(
            bad_origin.to_bytes(),
            Err(ParseError::InvalidField { offset: 6, .. })
        ));
    }

    #[test]
    fn host_behavior_layout() {
        let mut b = vec![0u8; 512];
        b[0] = 1;
        b[2] = 1;
        let h = HostBehavior::parse(&b).unwrap();
        assert_eq!(
            h,
            HostBehavior {
                acre: true,
                etdas: false,
                lbafee: true
            }
        );
        assert_eq!(h.to_bytes(), b);
        b[3] = 1; // defined by a later revision: ignored
        b[0] = 0xFF;
        assert_eq!(HostBehavior::parse(&b).unwrap(), h);
        assert!(HostBehavior::parse(&b[..511]).is_err());
        b.push(0);
        assert!(HostBehavior::parse(&b).is_err());
    }

    #[test]
    fn select_and_capabilities() {
        for v in 0..4 {
            assert_eq!(FeatureSelect::from_bits(v).unwrap().bits(), v);
        }
        assert_eq!(FeatureSelect::from_bits(4), None);
        let c = FeatureCapabilities {
            saveable: false,
            per_namespace: true,
            changeable: true,
        };
        assert_eq!(c.to_dword(), 0b110);
        assert_eq!(FeatureCapabilities::from_dword(0xFFFF_FFF6), c);
        assert_eq!(FeatureId(0x0F), FeatureId::KEEP_ALIVE_TIMER);
        assert_eq!(FeatureId::HOST_BEHAVIOR.0, 0x16);
    }

    proptest! {
        #[test]
        fn queues_round_trip(v: u32) {
            match NumberOfQueues::from_dword(v) {
                Ok(q) => prop_assert_eq!(q.to_dword(), v),
                Err(_) => prop_assert!(v & 0xFFFF == 0xFFFF || v >> 16 == 0xFFFF),
            }
        }

        #[test]
        fn timestamps_round_trip(millis in 0u64..=Timestamp::MAX_MILLIS, synch: bool, origin in 0u8..8) {
            let t = Timestamp { millis, synch, origin: TimestampOrigin(origin) };
            let b = t.to_bytes().unwrap();
            prop_assert_eq!(Timestamp::parse(&b).unwrap(), t);
        }

        #[test]
        fn any_timestamp_bytes(b: [u8; 8]) {
            let t = Timestamp::parse(&b).unwrap();
            let mut canon = b;
            canon[6] &= 0x0F;
            canon[7] = 0;
            prop_assert_eq!(t.to_bytes().unwrap(), canon);
        }

        #[test]
        fn host_behavior_round_trip(acre: bool, etdas: bool, lbafee: bool) {
            let h = HostBehavior { acre, etdas, lbafee };
            prop_assert_eq!(HostBehavior::parse(&h.to_bytes()).unwrap(), h);
        }
    }
}
