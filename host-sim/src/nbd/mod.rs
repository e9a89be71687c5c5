//! NBD export: work in progress (NBD issue).
