//! A pool kept as disk images in a directory ([`PoolDir`]); [`layout`] names what is in it.
//! Everything but the block size and the device model — which image fills which member slot,
//! which are spares, member states, LUNs — is read from the images' superblocks, so the images
//! alone are the pool.
//!
//! Each image is opened as a [`FileDisk`] and made a pool member by a [`Members`]: the product's
//! [`FileMembers`] serves the files as they are (`raidcore`: a plain `Pool<FileDisk, …>`); the
//! simulator wraps them in fault injection and a device model on a virtual clock.
//!
//! Images are found by name (`disk<number>.img`); the slot an image fills is found by its disk
//! GUID in the newest superblock generation ([`classify`]). An image the pool moved on without
//! (a failed member) is reported as stale and left alone; [`PoolDir::replace`] renames it to
//! `disk<number>.img.failed-g<generation>` before a blank image takes its name.
//!
//! Modules: [`layout`] (names, the description file), [`lock`] (one process at a time),
//! [`create`] (new pools, `--force`), [`open`] (import from the images), [`classify`] (which
//! image is what), [`admin`] (fail, replace, spares, maintenance), [`images`], [`error`].

pub mod admin;
pub mod classify;
pub mod create;
pub mod error;
pub mod images;
pub mod layout;
pub mod lock;
pub mod logdev;
pub mod look;
pub mod observe;
pub mod open;
pub mod records;

pub use create::CreateOptions;
pub use error::DirError;
pub use images::{ImageInfo, ImageRole, failed_image_of_slot, failed_member_note, image_of_slot};
pub use layout::{DirMeta, LOCK_FILE, META_FILE, REPLACED_DIR, image_name, list_images};

use std::path::PathBuf;

use raidcore::pool::{ImportReport, Pool};
use raidcore_hal::{BlockDevice, ErrorKind, ErrorType};

use crate::disk::{FileDisk, Overlay};
use crate::status::DirStatus;
use lock::DirLock;

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
pub type HostPool<D> = Pool<D, Vec<u8>, MAX_DISKS, MAX_LUNS, MAP_PAGES, OPEN_EXTENTS>;

/// How a pool directory makes its images pool members.
pub trait Members {
    /// The pool's member type.
    type Disk: BlockDevice;

    /// Whether `flush` of an image calls `fdatasync(2)` (see
    /// [`FileDiskOptions::sync_on_flush`](crate::disk::FileDiskOptions::sync_on_flush)).
    fn sync_on_flush(&self) -> bool;

    /// The device-model name a new pool's description records ([`DirMeta::model`]).
    fn model_name(&self) -> &'static str;

    /// Told the description of the pool being opened, before any member is made (the simulator
    /// takes the device model from it unless told another). The default ignores it.
    fn described(&mut self, meta: &DirMeta) -> Result<(), DirError> {
        let _ = meta;
        Ok(())
    }

    /// Makes image number `number`, open (and locked) as `image`, a pool member.
    fn member(&mut self, number: usize, image: FileDisk) -> Self::Disk;

    /// Makes `image` the pool's dedicated intent-log device; `model` is the device-model name
    /// the description records for it ([`DirMeta::log_model`]; `None`: the members').
    ///
    /// Errors: [`DirError::Invalid`] for a model the simulator does not know.
    fn log_device(&mut self, image: FileDisk, model: Option<&str>) -> Result<Self::Disk, DirError>;

    /// Whether the images are opened read-only and nothing is written beside them (see
    /// [`ReadOnlyMembers`]). The default is `false`.
    fn read_only(&self) -> bool {
        false
    }
}

/// The members `M` makes, each over its image opened read-only and under an [`Overlay`] that
/// keeps what the pool writes in memory (at most `cap_bytes` per member): a pool opened on
/// them (`serve --read-only`) runs its import — forced, rewound — as on writable images, and
/// nothing reaches the images or the directory (no lock file, event log or records written;
/// the images' shared locks keep writers out meanwhile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOnlyMembers<M> {
    /// What makes each image a member.
    pub inner: M,
    /// Bytes each member's overlay may hold (`serve --read-only-memory`).
    pub cap_bytes: u64,
}

impl<M: Members> Members for ReadOnlyMembers<M>
where
    <M::Disk as ErrorType>::Error: From<ErrorKind>,
{
    type Disk = Overlay<M::Disk>;

    fn sync_on_flush(&self) -> bool {
        false
    }

    fn model_name(&self) -> &'static str {
        self.inner.model_name()
    }

    fn described(&mut self, meta: &DirMeta) -> Result<(), DirError> {
        self.inner.described(meta)
    }

    fn member(&mut self, number: usize, image: FileDisk) -> Overlay<M::Disk> {
        let disk = self.inner.member(number, image);
        Overlay::new(disk, self.cap_bytes, image_name(number))
    }

    fn log_device(
        &mut self,
        image: FileDisk,
        model: Option<&str>,
    ) -> Result<Overlay<M::Disk>, DirError> {
        let disk = self.inner.log_device(image, model)?;
        Ok(Overlay::new(disk, self.cap_bytes, "the log device"))
    }

    fn read_only(&self) -> bool {
        true
    }
}

/// Members that are the image files themselves: what `raidcore` serves. A pool created with a
/// device model (`raidcore-sim create --model`) is served the same way: the model is timing for
/// the simulator, not part of the data, and `raidcore` does not wait for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMembers {
    /// `flush` calls `fdatasync(2)` (default `true`; `serve --no-sync` turns it off).
    pub sync_on_flush: bool,
}

impl Default for FileMembers {
    fn default() -> Self {
        FileMembers {
            sync_on_flush: true,
        }
    }
}

impl Members for FileMembers {
    type Disk = FileDisk;

    fn sync_on_flush(&self) -> bool {
        self.sync_on_flush
    }

    /// `memory`: the simulator's name for a device with no latency of its own.
    fn model_name(&self) -> &'static str {
        "memory"
    }

    fn member(&mut self, _number: usize, image: FileDisk) -> FileDisk {
        image
    }

    fn log_device(&mut self, image: FileDisk, _model: Option<&str>) -> Result<FileDisk, DirError> {
        Ok(image)
    }
}

/// A pool open on the images of a directory, holding the directory's lock.
#[derive(Debug)]
pub struct PoolDir<M: Members> {
    /// The directory.
    pub dir: PathBuf,
    /// The pool.
    pub pool: HostPool<M::Disk>,
    /// What made the members (the simulator keeps its clock and handles here).
    pub members: M,
    /// The images and their roles when the pool was opened (or created), kept up to date by
    /// [`admin`]'s calls.
    pub images: Vec<ImageInfo>,
    /// What import found (default for a created pool).
    pub import: ImportReport,
    /// The description file's contents.
    pub meta: DirMeta,
    /// What the host keeps beside the images (counters, last scrub and rebuild).
    pub records: records::Records,
    /// What [`PoolDir::observe`] remembers between looks.
    pub watch: observe::Watch,
    /// The directory's lock ([`LOCK_FILE`]), held while this value lives (none for
    /// [`ReadOnlyMembers`]); declared last, so it is released after the images.
    lock: Option<DirLock>,
}

impl<M: Members> PoolDir<M> {
    /// The image number filling member slot `slot` when the pool was opened, if any.
    #[must_use]
    pub fn image_of_slot(&self, slot: usize) -> Option<usize> {
        image_of_slot(&self.images, slot)
    }

    /// What `status` prints, from the pool's status and LUN table, with the persistent
    /// error counters and the last scrub and rebuild on record.
    pub fn status(&mut self) -> DirStatus {
        let totals = self.error_totals();
        let mut st = DirStatus::of(&mut self.pool, &self.dir, &self.meta, &self.images);
        for (d, t) in st.disks.iter_mut().zip(totals) {
            d.errors = t;
        }
        st.last_scrub.clone_from(&self.records.last_scrub);
        st.last_rebuild.clone_from(&self.records.last_rebuild);
        st.scrub_paused = self.records.scrub_paused && st.scrub.is_some();
        st.read_only = self.members.read_only();
        st.explain();
        st
    }

    /// Flushes, checkpoints and closes the pool (the images hold everything), then releases
    /// the images' and the directory's locks. The records and event log are brought up to
    /// date first. A pool opened read-only ([`ReadOnlyMembers`]) is only dropped.
    pub fn close(mut self) -> Result<(), DirError> {
        self.observe();
        self.save_records();
        if self.members.read_only() {
            // What a shutdown would write stays in memory and is dropped anyway.
            return Ok(());
        }
        let PoolDir { pool, lock, .. } = self;
        pool.shutdown()?;
        drop(lock);
        Ok(())
    }

    /// The records and the watch of a pool just opened or created in `dir`.
    fn start_records(
        dir: &std::path::Path,
        pool: &HostPool<M::Disk>,
    ) -> (records::Records, observe::Watch) {
        let (records, warning) = records::Records::load(dir);
        if let Some(w) = warning {
            log::warn!("{w}");
        }
        let st = pool.status();
        let watch = observe::Watch::new(pool.events().next_seq(), st.health);
        (records, watch)
    }
}
