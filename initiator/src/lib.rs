//! User-space NVMe-oF host. Not implemented yet (issue 6).
