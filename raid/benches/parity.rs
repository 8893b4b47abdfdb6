//! Parity benchmark placeholder replaced below.
fn main() {}
