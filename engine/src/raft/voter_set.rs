//! The voter set as the log implies it (docs/protocol.md, "The voter set lives in the log").
//!
//! Every replica applies the newest voter record (control type 100) in its log as soon as it
//! is appended, and reverts it when a truncation removes it. The history kept here is what that
//! needs: the set the log implies below `base_offset` (the quorum-state file's cache, which only
//! ever holds a committed set), and every voter record at or above it, newest last.

pub use crate::record::voters::{voter_records, VoterConfig, VoterRecord, VoterRecordError};

use super::types::Offset;

/// The voter records of the log above the committed base, and the base.
#[derive(Clone, Debug)]
pub(crate) struct VoterHistory {
    base: VoterConfig,
    /// The log below this offset implies `base` (the quorum-state file's AppliedOffset).
    base_offset: Offset,
    /// Voter records at or above `base_offset`, ascending by offset.
    records: Vec<(Offset, VoterConfig)>,
}

impl VoterHistory {
    pub(crate) fn new(base: VoterConfig, base_offset: Offset) -> Self {
        Self {
            base,
            base_offset,
            records: Vec::new(),
        }
    }

    /// The set in force: the newest record's, or the base.
    pub(crate) fn latest(&self) -> &VoterConfig {
        self.records.last().map_or(&self.base, |(_, c)| c)
    }

    pub(crate) fn base(&self) -> &VoterConfig {
        &self.base
    }

    pub(crate) fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Every set the log above the committed one states, the committed one first.
    pub(crate) fn configs(&self) -> impl Iterator<Item = &VoterConfig> {
        std::iter::once(&self.base).chain(self.records.iter().map(|(_, c)| c))
    }

    /// The offset of the newest voter record above the base, if any.
    pub(crate) fn latest_offset(&self) -> Option<Offset> {
        self.records.last().map(|(o, _)| *o)
    }

    /// A record appended at `offset` (above every one before).
    pub(crate) fn append(&mut self, offset: Offset, config: VoterConfig) {
        assert!(offset >= self.base_offset, "a voter record below the base");
        assert!(
            self.latest_offset().is_none_or(|o| o < offset),
            "voter records out of order"
        );
        self.records.push((offset, config));
    }

    /// A truncation to `offset` removes the records at or above it. Returns whether the set in
    /// force changed.
    pub(crate) fn truncate(&mut self, offset: Offset) -> bool {
        assert!(
            offset >= self.base_offset,
            "truncation to {offset} below the committed voter set's offset {}",
            self.base_offset
        );
        let before = self.records.len();
        self.records.retain(|(o, _)| *o < offset);
        self.records.len() != before
    }

    /// Folds the records below the high watermark `hw` into the base. Returns whether the base
    /// changed (it must then be persisted).
    pub(crate) fn commit(&mut self, hw: Offset) -> bool {
        let committed = self.records.iter().take_while(|(o, _)| *o < hw).count();
        if committed == 0 {
            return false;
        }
        let (offset, config) = self
            .records
            .drain(..committed)
            .next_back()
            .expect("one at least");
        self.base = config;
        self.base_offset = offset + 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[i32]) -> VoterConfig {
        VoterConfig {
            current: ids.to_vec(),
            target: None,
            force: false,
            ..Default::default()
        }
    }

    #[test]
    fn a_truncation_removes_the_records_at_and_above_it_only() {
        let mut h = VoterHistory::new(set(&[1]), 0);
        h.append(2, set(&[1, 2]));
        h.append(5, set(&[1, 2, 3]));
        assert!(h.truncate(4));
        assert_eq!(h.latest(), &set(&[1, 2]), "the record below the cut stays");
        assert!(!h.truncate(3), "nothing at or above 3 is left");
        assert!(h.truncate(2));
        assert_eq!(h.latest(), &set(&[1]));
    }
}
