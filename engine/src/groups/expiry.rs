//! Expiry of idle groups' committed offsets (`offsets.retention.minutes`; docs/protocol.md,
//! "Consumer groups", and docs/storage.md, "Committed offsets"). Kafka forgets the offsets of
//! a group that has been empty for the retention time; so does the coordinator here, through
//! the log: an expired offset becomes a tombstone (or the whole group a DeleteGroup record)
//! that the leader appends like an OffsetDelete, so every replica forgets it at the same
//! offset.
//!
//! An offset expires when, on the leader, both of these are at least the retention time ago:
//! - its commit (the record's commit timestamp, the wall clock of the leader that wrote it);
//! - the last time the group had members, or, when it had none since, the moment this replica
//!   began coordinating (membership is not replicated, so a new leader cannot know how long a
//!   group has been empty and counts from its own start: an expiry may come later than on a
//!   leader that ran all along, never earlier).
//!
//! Logic only: the monotonic time and the wall clock come in, records to append go out.

use std::collections::BTreeMap;

use crate::base::TimeMs;

use super::membership::Membership;
use super::offsets::{GroupOffsetsRecord, OffsetStore, PartitionOffset};

/// Groups whose offsets expire in one check at most: the rest wait for the next check, which
/// comes this soon after a check that stopped there.
pub const MAX_EXPIRED_GROUPS_PER_CHECK: usize = 100;
pub const CONTINUE_AFTER_MS: TimeMs = 100;

/// When offsets expire, and the expiry's clock on the coordinator.
#[derive(Debug)]
pub struct OffsetExpiry {
    /// `offsets.retention.minutes`, in ms.
    retention_ms: TimeMs,
    /// `offsets.retention.check.interval.ms`.
    check_interval_ms: TimeMs,
    /// When this replica began coordinating (None: it does not).
    since: Option<TimeMs>,
    /// When the next check is due.
    due: TimeMs,
    /// Groups seen with members, and when last (bounded by the groups with members or
    /// offsets: the others are dropped at each check).
    busy_at: BTreeMap<String, TimeMs>,
}

impl OffsetExpiry {
    pub fn new(retention_ms: TimeMs, check_interval_ms: TimeMs) -> Self {
        assert!(
            retention_ms > 0 && check_interval_ms > 0,
            "offsets' retention {retention_ms} ms, checked every {check_interval_ms} ms"
        );
        Self {
            retention_ms,
            check_interval_ms,
            since: None,
            due: 0,
            busy_at: BTreeMap::new(),
        }
    }

    /// This replica began coordinating at `now`: the first check comes one interval later.
    pub fn led(&mut self, now: TimeMs) {
        self.since = Some(now);
        self.due = now.saturating_add(self.check_interval_ms);
        self.busy_at.clear();
    }

    /// This replica stopped coordinating.
    pub fn resigned(&mut self) {
        self.since = None;
        self.busy_at.clear();
    }

    /// `group_id` has members at `now` (a membership request was decided for it).
    pub fn busy(&mut self, group_id: &str, now: TimeMs) {
        if self.since.is_none() {
            return;
        }
        match self.busy_at.get_mut(group_id) {
            Some(at) => *at = now,
            None => {
                self.busy_at.insert(group_id.to_string(), now);
            }
        }
    }

    /// When the next check is due, while coordinating.
    pub fn next_deadline(&self) -> Option<TimeMs> {
        self.since.map(|_| self.due)
    }

    /// The records that expire offsets at `now` (monotonic) and `wall_ms` (the leader's wall
    /// clock), when a check is due: one per group, a DeleteGroup record when every offset of
    /// the group expires, else tombstones for those that do. Groups with members, or with a
    /// record not yet committed (a commit in flight would be deleted by a tombstone appended
    /// after it), are left alone.
    pub fn expire(
        &mut self,
        now: TimeMs,
        wall_ms: i64,
        membership: &Membership,
        offsets: &OffsetStore,
    ) -> Vec<GroupOffsetsRecord> {
        let Some(since) = self.since else {
            return Vec::new();
        };
        if now < self.due {
            return Vec::new();
        }
        self.due = now.saturating_add(self.check_interval_ms);
        for (group_id, _, _) in membership.list() {
            self.busy(group_id, now);
        }
        self.busy_at
            .retain(|g, _| membership.has_members(g) || offsets.group(g).is_some());
        let retention = self.retention_ms;
        let old_enough = |timestamp_ms: i64| {
            i128::from(wall_ms) - i128::from(timestamp_ms) >= i128::from(retention)
        };
        let mut records = Vec::new();
        for group_id in offsets.groups() {
            if membership.has_members(group_id) || offsets.has_uncommitted(group_id) {
                continue;
            }
            let quiet_since = self
                .busy_at
                .get(group_id)
                .map_or(since, |&at| at.max(since));
            if now.saturating_sub(quiet_since) < retention {
                continue;
            }
            let committed = offsets.group(group_id).expect("listed");
            let expired: Vec<&(String, i32)> = committed
                .iter()
                .filter(|(_, c)| old_enough(c.commit_timestamp_ms))
                .map(|(key, _)| key)
                .collect();
            if expired.is_empty() {
                continue;
            }
            if records.len() == MAX_EXPIRED_GROUPS_PER_CHECK {
                self.due = now.saturating_add(CONTINUE_AFTER_MS);
                break;
            }
            let delete_group = expired.len() == committed.len();
            records.push(GroupOffsetsRecord {
                group_id: group_id.to_string(),
                commit_timestamp_ms: wall_ms,
                delete_group,
                offsets: match delete_group {
                    true => Vec::new(),
                    false => expired
                        .into_iter()
                        .map(|(topic, partition)| PartitionOffset {
                            topic: topic.clone(),
                            partition: *partition,
                            offset: None,
                            leader_epoch: None,
                            metadata: None,
                        })
                        .collect(),
                },
            });
        }
        records
    }
}
