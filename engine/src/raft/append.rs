//! Client appends on the leader and durability reports from the driver.

use bytes::BytesMut;

use super::core::RaftCore;
use super::leader::PendingAppend;
use super::record_glue;
use super::types::{Acks, AppendResult, Batch, Output};
use super::{ErrorCode, Role};

impl RaftCore {
    pub(crate) fn on_client_append(
        &mut self,
        id: u64,
        bytes: BytesMut,
        record_count: u32,
        acks: Acks,
        out: &mut Vec<Output>,
    ) {
        if let Err(error) = self.check_append(&bytes, record_count, false) {
            return self.fail_append(id, acks, error, out);
        }
        if !self.lease_holds() {
            // A newer leader may exist: a write acknowledged here with acks 0 or 1 would be
            // cut (docs/consistency.md, "Produce").
            return self.fail_append(id, acks, ErrorCode::NOT_LEADER_OR_FOLLOWER, out);
        }
        let (base_offset, end_offset) = self.append_stamped(bytes, record_count, false, out);
        if acks != Acks::None {
            self.leading().appends.push_back(PendingAppend {
                id,
                base_offset,
                end_offset,
                acks,
            });
        }
        self.complete_parked_with_records(out);
    }

    /// A control batch of the node's own (a producer-id block). Not answered: a node that wants
    /// it sees it in the log and its commit in the high watermark, and asks again if it never
    /// comes (not the leader, or the unflushed bytes are over the limit).
    pub(crate) fn on_append_control(&mut self, bytes: BytesMut, out: &mut Vec<Output>) {
        if self.check_append(&bytes, 1, true).is_err() || carries_voter_record(&bytes) {
            return;
        }
        self.append_stamped(bytes, 1, true, out);
        self.complete_parked_with_records(out);
    }

    /// Whether a batch may be appended now: only by a serving leader, within the bound on bytes
    /// not yet durable, and only whole batches whose header agrees with what the caller says.
    fn check_append(
        &self,
        bytes: &[u8],
        record_count: u32,
        is_control: bool,
    ) -> Result<(), ErrorCode> {
        if self.storage_full {
            return Err(ErrorCode::KAFKA_STORAGE_ERROR);
        }
        // A handover pause answers as the handover will: a client retries, and finds the
        // successor (docs/protocol.md, "Driving the change", rule 6).
        if self.qs.leader().is_none() || self.is_shutting_down() || self.appends_paused() {
            return Err(ErrorCode::NOT_LEADER_OR_FOLLOWER);
        }
        if record_count == 0 {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        // Bounded memory between the core and the disk: beyond the limit a client is told to
        // retry (one batch larger than the limit still goes through when nothing is pending).
        let unflushed = self.log.unflushed_bytes();
        if (unflushed > 0 && unflushed + bytes.len() > self.config.max_unflushed_bytes)
            || self.log.unflushed_ops() >= self.config.max_unflushed_ops
        {
            return Err(ErrorCode::REQUEST_TIMED_OUT);
        }
        let Some(header) = record_glue::whole_batch_header(bytes) else {
            return Err(ErrorCode::CORRUPT_MESSAGE);
        };
        if header.records_count as u32 != record_count || header.is_control() != is_control {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        Ok(())
    }

    /// Appends a checked batch at the log end in the leader's epoch; returns its offsets
    /// (base, end).
    fn append_stamped(
        &mut self,
        mut bytes: BytesMut,
        record_count: u32,
        is_control: bool,
        out: &mut Vec<Output>,
    ) -> (i64, i64) {
        let base_offset = self.log.end_offset();
        let epoch = self.qs.epoch();
        debug_assert_eq!(
            self.log.last_epoch(),
            epoch,
            "a leader's log ends in its epoch"
        );
        record_glue::stamp(&mut bytes, base_offset, epoch);
        let batch = Batch {
            base_offset,
            epoch,
            record_count,
            is_control,
            bytes: bytes.freeze(),
        };
        let end_offset = batch.end_offset();
        self.log.append(vec![batch], out);
        (base_offset, end_offset)
    }

    /// Answers a leader's appends that are committed (Quorum) or durable here (Leader).
    pub(crate) fn complete_appends(&mut self, out: &mut Vec<Output>) {
        let durable = self.log.durable_end_offset();
        let l = self.leading();
        let hw = l.high_watermark.unwrap_or(-1);
        if l.appends.is_empty() {
            return;
        }
        l.appends.retain(|a| {
            let done = match a.acks {
                Acks::Quorum => a.end_offset <= hw,
                Acks::Leader => a.end_offset <= durable,
                Acks::None => true,
            };
            if done && a.acks != Acks::None {
                out.push(Output::AppendDone {
                    id: a.id,
                    result: AppendResult::Appended {
                        base_offset: a.base_offset,
                        last_offset: a.end_offset - 1,
                    },
                });
            }
            !done
        });
    }

    pub(crate) fn on_log_durable(&mut self, up_to_seq: u64, out: &mut Vec<Output>) {
        let withheld = self.withheld_voter_record();
        if !self.log.mark_durable(up_to_seq) {
            return;
        }
        match self.qs.role() {
            Role::Leader => {
                self.update_leader_hw(out);
                self.complete_appends(out);
                if withheld.is_some() && self.withheld_voter_record().is_none() {
                    // The voter record rule 9 held back may go out now: to the waiting fetches.
                    self.complete_parked_with_records(out);
                }
            }
            _ if self.qs.fetching_from().is_some() => self.refresh_durable_offset(out),
            _ => {}
        }
        if !self.stopped {
            self.fold_committed_voter_records(out);
        }
    }
}

/// Only the core writes voter records (docs/protocol.md, "The voter set lives in the log"): a
/// control batch of the node's own that holds one (or cannot be read) is dropped.
fn carries_voter_record(bytes: &BytesMut) -> bool {
    let Ok(view) = crate::record::BatchView::parse(bytes.clone().freeze()) else {
        return true;
    };
    crate::record::control::ControlRecord::decode_batch(&view).map_or(true, |records| {
        records.iter().any(|r| {
            matches!(
                r,
                crate::record::control::ControlRecord::QuorumReassignment(_)
            )
        })
    })
}
