//! The raidline target daemon. Not implemented yet (issue 9).
