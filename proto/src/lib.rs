//! NVMe and NVMe-oF wire formats (being written, issue 2).
