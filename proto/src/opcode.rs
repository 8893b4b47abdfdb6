//! Command opcodes: Admin (Base Figure 139), NVM I/O (NVM Figure 18) and Fabrics command types
//! (Fabrics Figure 12). Unknown values are kept so the target answers "invalid opcode" precisely.

code_newtype! {
    /// Admin command set opcode (SQE byte 0 on the admin queue).
    pub struct AdminOpcode(u8) {
        /// Delete I/O Submission Queue.
        DELETE_IO_SQ = 0x00,
        /// Create I/O Submission Queue.
        CREATE_IO_SQ = 0x01,
        /// Get Log Page.
        GET_LOG_PAGE = 0x02,
        /// Delete I/O Completion Queue.
        DELETE_IO_CQ = 0x04,
        /// Create I/O Completion Queue.
        CREATE_IO_CQ = 0x05,
        /// Identify.
        IDENTIFY = 0x06,
        /// Abort.
        ABORT = 0x08,
        /// Set Features.
        SET_FEATURES = 0x09,
        /// Get Features.
        GET_FEATURES = 0x0A,
        /// Asynchronous Event Request.
        ASYNC_EVENT_REQUEST = 0x0C,
        /// Namespace Management.
        NS_MANAGEMENT = 0x0D,
        /// Firmware Commit.
        FIRMWARE_COMMIT = 0x10,
        /// Firmware Image Download.
        FIRMWARE_DOWNLOAD = 0x11,
        /// Device Self-test.
        DEVICE_SELF_TEST = 0x14,
        /// Namespace Attachment.
        NS_ATTACHMENT = 0x15,
        /// Keep Alive.
        KEEP_ALIVE = 0x18,
        /// Directive Send.
        DIRECTIVE_SEND = 0x19,
        /// Directive Receive.
        DIRECTIVE_RECEIVE = 0x1A,
        /// Virtualization Management.
        VIRTUALIZATION_MANAGEMENT = 0x1C,
        /// NVMe-MI Send.
        NVME_MI_SEND = 0x1D,
        /// NVMe-MI Receive.
        NVME_MI_RECEIVE = 0x1E,
        /// Doorbell Buffer Config.
        DOORBELL_BUFFER_CONFIG = 0x7C,
        /// Fabrics command (the command type is in SQE byte 4).
        FABRICS = 0x7F,
        /// Format NVM.
        FORMAT_NVM = 0x80,
        /// Security Send.
        SECURITY_SEND = 0x81,
        /// Security Receive.
        SECURITY_RECEIVE = 0x82,
        /// Sanitize.
        SANITIZE = 0x84,
        /// Get LBA Status.
        GET_LBA_STATUS = 0x86,
    }
}

code_newtype! {
    /// NVM command set I/O opcode (SQE byte 0 on an I/O queue).
    pub struct IoOpcode(u8) {
        /// Flush.
        FLUSH = 0x00,
        /// Write.
        WRITE = 0x01,
        /// Read.
        READ = 0x02,
        /// Write Uncorrectable.
        WRITE_UNCORRECTABLE = 0x04,
        /// Compare.
        COMPARE = 0x05,
        /// Write Zeroes.
        WRITE_ZEROES = 0x08,
        /// Dataset Management.
        DATASET_MANAGEMENT = 0x09,
        /// Verify.
        VERIFY = 0x0C,
        /// Reservation Register.
        RESERVATION_REGISTER = 0x0D,
        /// Reservation Report.
        RESERVATION_REPORT = 0x0E,
        /// Reservation Acquire.
        RESERVATION_ACQUIRE = 0x11,
        /// Reservation Release.
        RESERVATION_RELEASE = 0x15,
        /// Copy.
        COPY = 0x19,
        /// Fabrics command (the command type is in SQE byte 4).
        FABRICS = 0x7F,
    }
}

impl IoOpcode {
    /// Data transfer direction encoded in opcode bits 1:0 (Base §5.x, "Opcodes"): 01b host to
    /// controller, 10b controller to host, 11b bidirectional, 00b none.
    pub fn data_transfer(self) -> DataTransfer {
        DataTransfer::from_opcode_bits(self.0)
    }
}

impl AdminOpcode {
    /// Data transfer direction encoded in opcode bits 1:0.
    pub fn data_transfer(self) -> DataTransfer {
        DataTransfer::from_opcode_bits(self.0)
    }
}

/// Direction of a command's data transfer, from the low two opcode bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataTransfer {
    /// No data.
    None,
    /// Host to controller (a write: the target fetches data).
    HostToController,
    /// Controller to host (a read: the target returns data).
    ControllerToHost,
    /// Both directions.
    Bidirectional,
}

impl DataTransfer {
    fn from_opcode_bits(op: u8) -> DataTransfer {
        match op & 0x3 {
            0 => DataTransfer::None,
            1 => DataTransfer::HostToController,
            2 => DataTransfer::ControllerToHost,
            _ => DataTransfer::Bidirectional,
        }
    }
}

code_newtype! {
    /// Fabrics command type (SQE byte 4 when the opcode is 0x7F; Fabrics Figure 12).
    pub struct FabricsCommandType(u8) {
        /// Property Set.
        PROPERTY_SET = 0x00,
        /// Connect.
        CONNECT = 0x01,
        /// Property Get.
        PROPERTY_GET = 0x04,
        /// Authentication Send.
        AUTH_SEND = 0x05,
        /// Authentication Receive.
        AUTH_RECEIVE = 0x06,
        /// Disconnect.
        DISCONNECT = 0x08,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_values_survive_and_print() {
        let op = AdminOpcode(0xC3);
        assert!(!op.is_known());
        assert_eq!(format!("{op:?}"), "AdminOpcode(0xc3)");
        assert_eq!(format!("{}", AdminOpcode::IDENTIFY), "IDENTIFY");
        assert_eq!(u8::from(IoOpcode::from(0x02)), 0x02);
    }

    #[test]
    fn transfer_direction_follows_opcode_bits() {
        assert_eq!(
            IoOpcode::WRITE.data_transfer(),
            DataTransfer::HostToController
        );
        assert_eq!(
            IoOpcode::READ.data_transfer(),
            DataTransfer::ControllerToHost
        );
        assert_eq!(IoOpcode::FLUSH.data_transfer(), DataTransfer::None);
        assert_eq!(
            AdminOpcode::GET_LOG_PAGE.data_transfer(),
            DataTransfer::ControllerToHost
        );
        assert_eq!(
            AdminOpcode::SET_FEATURES.data_transfer(),
            DataTransfer::HostToController
        );
    }
}
