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
    /// The GUID the pool knows the disk by, for members and spares (from its superblock, or
    /// from the pool when it took the image).
    /// In JSON a string of 16 hex digits (a JSON number loses bits past 2^53 in most readers).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "hex_guid")]
    pub guid: Option<u64>,
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
            guid: None,
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
        self.guid = None;
    }

    /// This image with the GUID `guid`.
    #[must_use]
    pub fn with_guid(self, guid: u64) -> ImageInfo {
        ImageInfo {
            guid: Some(guid),
            ..self
        }
    }
}

/// What [`failed_member_note`] puts before the slot number.
const FAILED_MEMBER_NOTE: &str = "failed member of slot ";

/// The note of the image of a member that failed in slot `slot`.
#[must_use]
pub fn failed_member_note(slot: usize) -> String {
    format!("{FAILED_MEMBER_NOTE}{slot}")
}

/// Whether `note` is a [`failed_member_note`] (of any slot).
#[must_use]
pub fn is_failed_member_note(note: &str) -> bool {
    note.strip_prefix(FAILED_MEMBER_NOTE)
        .is_some_and(|n| n.parse::<usize>().is_ok())
}

/// The number of the image of the member that failed in slot `slot` (left out, still in the
/// directory), if any.
#[must_use]
pub fn failed_image_of_slot(images: &[ImageInfo], slot: usize) -> Option<usize> {
    let note = failed_member_note(slot);
    images
        .iter()
        .find(|i| i.role == ImageRole::Stale && i.note.as_deref() == Some(note.as_str()))
        .map(|i| i.number)
}

/// The number of the image filling member slot `slot` in `images`, if any.
#[must_use]
pub fn image_of_slot(images: &[ImageInfo], slot: usize) -> Option<usize> {
    images
        .iter()
        .find(|i| i.role == ImageRole::Member && i.slot == Some(slot))
        .map(|i| i.number)
}

/// A GUID as a string of 16 hex digits, for JSON.
mod hex_guid {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    #[expect(clippy::ref_option, reason = "the signature serde's `with` calls")]
    pub fn serialize<S: Serializer>(guid: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match guid {
            Some(g) => s.serialize_str(&format!("{g:016x}")),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| u64::from_str_radix(&t, 16).map_err(D::Error::custom))
            .transpose()
    }
}
