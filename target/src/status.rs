//! The one place where failures become NVMe statuses (after Linux nvmet's
//! `blk_to_nvme_status`): parse errors of a command, namespace and array errors. Every status
//! that a retry cannot fix carries DNR.

use raidline_proto::error::ParseError;
use raidline_proto::{Status, StatusCode};

/// SQE byte of the SGL identifier (DPTR byte 15).
const SGL_IDENTIFIER_BYTE: usize = 39;

/// The status answering a command whose SQE (or in-capsule data structure) failed to parse.
pub fn for_parse_error(e: &ParseError) -> Status {
    let code = match e {
        ParseError::InvalidField { offset, .. } if *offset == SGL_IDENTIFIER_BYTE => {
            StatusCode::SGL_DESCRIPTOR_TYPE_INVALID
        }
        ParseError::WrongOpcode { .. } => StatusCode::INVALID_OPCODE,
        ParseError::Truncated { .. } | ParseError::TrailingBytes { .. } => {
            StatusCode::DATA_SGL_LENGTH_INVALID
        }
        _ => StatusCode::INVALID_FIELD,
    };
    Status::new(code).dnr()
}

/// A failure of the storage behind a namespace, as the I/O path reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageError {
    /// Data could not be read (e.g. two array members lost): never retried, never wrong data.
    Unrecovered,
    /// Data could not be written.
    WriteFault,
    /// The array is stopped or not assembled; a retry after recovery may succeed.
    NotReady,
    /// Anything else (resource exhaustion, a bug): internal error, retryable.
    Internal,
}

/// The status for a storage failure.
pub fn for_storage_error(e: StorageError) -> Status {
    match e {
        StorageError::Unrecovered => Status::new(StatusCode::UNRECOVERED_READ_ERROR).dnr(),
        StorageError::WriteFault => Status::new(StatusCode::WRITE_FAULT).dnr(),
        StorageError::NotReady => Status::new(StatusCode::NS_NOT_READY),
        StorageError::Internal => Status::new(StatusCode::INTERNAL_ERROR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidline_proto::io::IoCommand;
    use raidline_proto::Sqe;

    #[test]
    fn bad_sgl_type_is_sgl_descriptor_type_invalid() {
        let mut s = Sqe::new(0x02, 1);
        s.as_bytes_mut()[39] = 0x70;
        let e = IoCommand::parse(&s).unwrap_err();
        assert_eq!(
            for_parse_error(&e),
            Status::new(StatusCode::SGL_DESCRIPTOR_TYPE_INVALID).dnr()
        );
    }

    #[test]
    fn storage_errors() {
        assert_eq!(
            for_storage_error(StorageError::Unrecovered).to_field(),
            0x4281
        );
        assert!(!for_storage_error(StorageError::Internal).dnr);
    }
}
