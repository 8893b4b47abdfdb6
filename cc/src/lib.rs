//! Congestion control. Not implemented yet (issue 7).
