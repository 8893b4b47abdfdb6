//! RDMA transport. Not implemented yet (issue 3).
