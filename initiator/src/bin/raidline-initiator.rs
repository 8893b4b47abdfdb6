//! `raidline-initiator`: the CLI (being written).
fn main() {}
