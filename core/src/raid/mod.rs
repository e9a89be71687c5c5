//! The RAID layer: geometry (where strips live) and the array over member disks (full-stripe
//! writes, degraded reads, repair, verify and rebuild primitives).

mod array;
mod geometry;

pub(crate) use array::with_retries;
pub use array::{
    Array, ArrayConfig, ArrayError, ArrayStats, DiskErrors, DiskSet, DiskState, LostRange,
    LostRows, Member, VerifyReport,
};
pub use geometry::{
    Column, Geometry, GeometryError, Level, MAX_DISKS, MAX_STRIP_BYTES, MIN_STRIP_BYTES,
};

#[cfg(test)]
mod exhaustive;
#[cfg(test)]
pub(crate) mod tests;
