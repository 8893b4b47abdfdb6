//! RAID-5 engine. Not implemented yet (issue 5).
