//! `status --json`: one JSON object, the fields of [`DirStatus`] as named there.

use super::DirStatus;

impl DirStatus {
    /// The JSON form (pretty-printed, one trailing newline).
    #[must_use]
    pub fn to_json(&self) -> String {
        // Plain data (strings, numbers, options, vectors) always serialises.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}
