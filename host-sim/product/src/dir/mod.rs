//! A pool kept as disk images in a directory (see [`layout`] for what is in it). Everything
//! but the block size and the device model — which image fills which member slot, which are
//! spares, member states, LUNs — is read from the images' superblocks, so the images alone are
//! the pool.

pub mod error;
pub mod images;
pub mod layout;
pub mod lock;

pub use error::DirError;
pub use images::{ImageInfo, ImageRole, image_of_slot};
pub use layout::{DirMeta, LOCK_FILE, META_FILE, REPLACED_DIR, image_name, list_images};

use raidcore::pool::Pool;

/// Most member + spare disks of a host pool.
pub const MAX_DISKS: usize = 16;
/// Most LUNs of a host pool.
pub const MAX_LUNS: usize = 16;
/// Map cache pages of a host pool (4032 arena bytes each).
pub const MAP_PAGES: usize = 256;
/// Open extents (write streams) of a host pool.
pub const OPEN_EXTENTS: usize = 16;

/// The pool type of the host tools over members of type `D` (the product's [`FileDisk`]s,
/// or the simulator's wrapped disks), with a `Vec<u8>` arena.
///
/// [`FileDisk`]: crate::disk::FileDisk
pub type HostPool<D> = Pool<D, Vec<u8>, MAX_DISKS, MAX_LUNS, MAP_PAGES, OPEN_EXTENTS>;
