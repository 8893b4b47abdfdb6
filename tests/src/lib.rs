//! Workspace-level integration tests (target + initiator + raid together). None yet.
