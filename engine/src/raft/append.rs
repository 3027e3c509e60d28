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
        mut bytes: BytesMut,
        record_count: u32,
        acks: Acks,
        out: &mut Vec<Output>,
    ) {
        if self.qs.leader().is_none() || self.is_shutting_down() {
            return self.fail_append(id, acks, ErrorCode::NOT_LEADER_OR_FOLLOWER, out);
        }
        // A leader from here on: nothing below changes the role.
        if record_count == 0 {
            return self.fail_append(id, acks, ErrorCode::INVALID_REQUEST, out);
        }
        // Bounded memory between the core and the disk: beyond the limit a client is told to
        // retry (one batch larger than the limit still goes through when nothing is pending).
        let unflushed = self.log.unflushed_bytes();
        if (unflushed > 0 && unflushed + bytes.len() > self.config.max_unflushed_bytes)
            || self.log.unflushed_ops() >= self.config.max_unflushed_ops
        {
            return self.fail_append(id, acks, ErrorCode::REQUEST_TIMED_OUT, out);
        }
        let Some(header) = record_glue::whole_batch_header(&bytes) else {
            return self.fail_append(id, acks, ErrorCode::CORRUPT_MESSAGE, out);
        };
        if header.records_count as u32 != record_count || header.is_control() {
            return self.fail_append(id, acks, ErrorCode::INVALID_REQUEST, out);
        }
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
            is_control: false,
            bytes: bytes.freeze(),
        };
        let end_offset = batch.end_offset();
        self.log.append(vec![batch], out);
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
        if !self.log.mark_durable(up_to_seq) {
            return;
        }
        match self.qs.role() {
            Role::Leader => {
                self.update_leader_hw(out);
                self.complete_appends(out);
            }
            Role::Follower => self.refresh_durable_offset(out),
            _ => {}
        }
    }
}
