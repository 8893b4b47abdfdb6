//! Log pages (Base §5.16.1): the identifiers Get Log Page names and the pages the target serves.
//!
//! - [`ErrorLogEntry`] (LID 01h, 64 bytes per entry, Base Figure 205),
//! - [`SmartLog`] (LID 02h, 512 bytes, Base Figure 207),
//! - [`FirmwareSlotLog`] (LID 03h, 512 bytes, Base Figure 209),
//! - [`ChangedNsList`] (LID 04h, 4096 bytes, Base §5.16.1.5),
//! - [`CommandEffectsLog`] (LID 05h, 4096 bytes, Base Figures 210–211),
//! - [`AnaLog`] (LID 0Ch, variable, Base Figures 218–219),
//! - [`DiscoveryLog`] (LID 70h, 1024-byte header and 1024-byte entries, Base Figures 262–264;
//!   Linux `struct nvmf_disc_rsp_page_hdr` / `nvmf_disc_rsp_page_entry`).
//!
//! As for Identify data, reserved bytes are ignored on parse and zeroed on emit; fixed-size
//! pages therefore round trip byte for byte whenever their reserved bytes are zero. Variable
//! pages (ANA, discovery) check every count against the bytes actually present before reading
//! or allocating, so a hostile count cannot make a parser allocate or index out of range.

mod ana;
mod discovery;
mod effects;
mod health;

pub use ana::{AnaGroupDescriptor, AnaLog, AnaState, ANA_LSP_RGO};
pub use discovery::{
    AddressFamily, DiscoveryEntry, DiscoveryLog, DiscoveryLogHeader, DiscoverySubtype,
    PartialDiscoveryLog, RdmaCms, RdmaProviderType, RdmaQpType, TransportType, Tsas,
    DISCOVERY_ENTRY_LEN, DISCOVERY_HEADER_LEN,
};
pub use effects::{ChangedNsList, CommandEffects, CommandEffectsLog};
pub use health::{critical_warning, ErrorLogEntry, FirmwareSlotLog, SmartLog};

code_newtype! {
    /// Log Page Identifier (Get Log Page CDW10 bits 7:0; Base Figure 202).
    pub struct LogPageId(u8) {
        /// Supported Log Pages.
        SUPPORTED_LOG_PAGES = 0x00,
        /// Error Information.
        ERROR = 0x01,
        /// SMART / Health Information.
        SMART = 0x02,
        /// Firmware Slot Information.
        FIRMWARE_SLOT = 0x03,
        /// Changed Namespace List.
        CHANGED_NS_LIST = 0x04,
        /// Commands Supported and Effects.
        COMMAND_EFFECTS = 0x05,
        /// Device Self-test.
        DEVICE_SELF_TEST = 0x06,
        /// Telemetry Host-Initiated.
        TELEMETRY_HOST = 0x07,
        /// Telemetry Controller-Initiated.
        TELEMETRY_CONTROLLER = 0x08,
        /// Endurance Group Information.
        ENDURANCE_GROUP = 0x09,
        /// Predictable Latency Per NVM Set.
        PREDICTABLE_LATENCY = 0x0A,
        /// Predictable Latency Event Aggregate.
        PREDICTABLE_LATENCY_AGGREGATE = 0x0B,
        /// Asymmetric Namespace Access.
        ANA = 0x0C,
        /// Persistent Event Log.
        PERSISTENT_EVENT = 0x0D,
        /// LBA Status Information.
        LBA_STATUS = 0x0E,
        /// Endurance Group Event Aggregate.
        ENDURANCE_GROUP_AGGREGATE = 0x0F,
        /// Media Unit Status.
        MEDIA_UNIT_STATUS = 0x10,
        /// Supported Capacity Configuration List.
        CAPACITY_CONFIGURATION = 0x11,
        /// Feature Identifiers Supported and Effects.
        FEATURE_EFFECTS = 0x12,
        /// NVMe-MI Commands Supported and Effects.
        MI_COMMAND_EFFECTS = 0x13,
        /// Command and Feature Lockdown.
        LOCKDOWN = 0x14,
        /// Boot Partition.
        BOOT_PARTITION = 0x15,
        /// Rotational Media Information.
        ROTATIONAL_MEDIA = 0x16,
        /// Discovery (discovery controllers only).
        DISCOVERY = 0x70,
        /// Host Discovery.
        HOST_DISCOVERY = 0x71,
        /// AVE Discovery.
        AVE_DISCOVERY = 0x72,
        /// Pull Model DDC Request.
        PULL_MODEL_DDC_REQUEST = 0x73,
        /// Reservation Notification.
        RESERVATION_NOTIFICATION = 0x80,
        /// Sanitize Status.
        SANITIZE_STATUS = 0x81,
    }
}
