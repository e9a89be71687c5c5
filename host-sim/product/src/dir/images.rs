//! Which image fills which place: [`ImageInfo`] per image, as the pool directory found it.

use serde::Serialize;

use super::layout::image_name;

/// What an image is to the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageRole {
    /// It fills a member slot.
    Member,
    /// A hot spare.
    Spare,
    /// Left out: the pool moved on without it, it holds no superblock of this pool, or its size
    /// makes it unusable (the note says which).
    Stale,
}

/// Where one image stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ImageInfo {
    /// Image number (`disk<number>.img`).
    pub number: usize,
    /// File name.
    pub file: String,
    /// Member, spare or stale.
    pub role: ImageRole,
    /// Member slot it fills, for members.
    pub slot: Option<usize>,
    /// Why it was left out, for stale images.
    pub note: Option<String>,
}

impl ImageInfo {
    /// Image `number` in `role`, filling `slot`, with no note.
    #[must_use]
    pub fn new(number: usize, role: ImageRole, slot: Option<usize>) -> ImageInfo {
        ImageInfo {
            number,
            file: image_name(number),
            role,
            slot,
            note: None,
        }
    }

    /// Image `number`, left out for the reason `note`.
    #[must_use]
    pub fn stale(number: usize, note: impl Into<String>) -> ImageInfo {
        ImageInfo {
            note: Some(note.into()),
            ..ImageInfo::new(number, ImageRole::Stale, None)
        }
    }

    /// Marks the image left out for the reason `note`.
    pub fn leave_out(&mut self, note: impl Into<String>) {
        self.role = ImageRole::Stale;
        self.slot = None;
        self.note = Some(note.into());
    }
}

/// The number of the image filling member slot `slot` in `images`, if any.
#[must_use]
pub fn image_of_slot(images: &[ImageInfo], slot: usize) -> Option<usize> {
    images
        .iter()
        .find(|i| i.role == ImageRole::Member && i.slot == Some(slot))
        .map(|i| i.number)
}
