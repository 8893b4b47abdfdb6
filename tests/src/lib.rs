//! Workspace-level integration tests (target + initiator + raid together): the `raidline`
//! daemon's end-to-end tests live in `tests/tests/` (`e2e*.rs`, `bring_up.rs`, `idle.rs`, with
//! the rig in `tests/tests/common`). Each crate's own tests stay with the crate.
