//! Work in progress (host-sim issue).
