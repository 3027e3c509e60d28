//! A consumer's read of the log (docs/protocol.md section 16): `Input::ClientFetch` answered
//! with committed data only, and the read-only queries behind ListOffsets and
//! OffsetForLeaderEpoch. Parking, log reads and expiry are the replica fetch's machinery
//! (`fetch.rs`, with `Fetcher::Consumer`); this module holds the rules that differ.

use super::core::RaftCore;
use super::leader::{Fetcher, MAX_PARKED_CONSUMER_FETCHES};
use super::types::{
    Batch, ClientFetch, ClientFetchResult, Epoch, ListedOffset, Offset, OffsetAndEpoch, OffsetSpec,
    Output, PartitionOffsets, ReadRefused,
};
use super::ErrorCode;

/// Kafka's answer to OffsetForLeaderEpoch when no epoch of the log is that old.
pub const UNDEFINED_EPOCH_END: OffsetAndEpoch = OffsetAndEpoch {
    offset: -1,
    epoch: -1,
};

/// What a consumer's last fetched epoch says about its log against the leader's.
#[derive(Debug, PartialEq, Eq)]
enum EpochCheck {
    Consistent,
    /// The consumer must truncate to this (epoch, end offset).
    Diverging(OffsetAndEpoch),
    /// No epoch of this log is that old: the consumer is out of range.
    Unknown,
}

impl RaftCore {
    // ----- queries (read-only: no state changes) -----

    /// The partition as a consumer sees it, when this node leads and `current_leader_epoch`
    /// (when given) is its epoch.
    pub fn consumer_offsets(
        &self,
        current_leader_epoch: Option<Epoch>,
    ) -> Result<PartitionOffsets, ReadRefused> {
        let leader_epoch = self.qs.epoch();
        if !self.leads_for_clients() {
            return Err(self.not_leader());
        }
        let leader_id = self.qs.local_id();
        match current_leader_epoch {
            Some(requested) if requested < leader_epoch => {
                return Err(ReadRefused::FencedLeaderEpoch {
                    requested,
                    leader_id,
                    leader_epoch,
                })
            }
            Some(requested) if requested > leader_epoch => {
                return Err(ReadRefused::UnknownLeaderEpoch {
                    requested,
                    leader_id,
                    leader_epoch,
                })
            }
            _ => {}
        }
        Ok(PartitionOffsets {
            leader_id,
            leader_epoch,
            log_start_offset: self.log.start_offset(),
            high_watermark: self.consumer_hw(),
        })
    }

    /// ListOffsets for a consumer: earliest is the log start (with the epoch that wrote it),
    /// latest the high watermark (with the leader's epoch, as Kafka answers).
    pub fn list_offsets(
        &self,
        current_leader_epoch: Option<Epoch>,
        spec: OffsetSpec,
    ) -> Result<ListedOffset, ReadRefused> {
        let p = self.consumer_offsets(current_leader_epoch)?;
        Ok(match spec {
            OffsetSpec::Earliest => ListedOffset {
                offset: p.log_start_offset,
                leader_epoch: self.log.epochs.epoch_at(p.log_start_offset),
            },
            OffsetSpec::Latest => ListedOffset {
                offset: p.high_watermark,
                leader_epoch: Some(p.leader_epoch),
            },
        })
    }

    /// OffsetForLeaderEpoch for a consumer: the largest epoch `<= epoch` and where it ends
    /// (the log end for the latest), or [`UNDEFINED_EPOCH_END`].
    pub fn offset_for_leader_epoch(
        &self,
        current_leader_epoch: Option<Epoch>,
        epoch: Epoch,
    ) -> Result<OffsetAndEpoch, ReadRefused> {
        self.consumer_offsets(current_leader_epoch)?;
        let found = self
            .log
            .epochs
            .end_offset_for_epoch(epoch, self.log.end_offset());
        Ok(
            found.map_or(UNDEFINED_EPOCH_END, |(epoch, offset)| OffsetAndEpoch {
                offset,
                epoch,
            }),
        )
    }

    /// Who a non-leader points a consumer to: the leader it fetches from (a follower's, or the
    /// one a prospective kept); nobody otherwise (a resigned leader is no longer one).
    /// A leader whose lease ran out names nobody: a newer leader may exist, unknown to it.
    fn not_leader(&self) -> ReadRefused {
        let leader_id = self.qs.fetching_from().unwrap_or(-1);
        ReadRefused::NotLeader {
            leader_id,
            leader_epoch: self.qs.epoch(),
        }
    }

    /// The committed end a leader serves consumers below: its high watermark, or until it has
    /// one in its epoch, the highest it learned before (committed data stays committed). A batch
    /// boundary either way: a majority's durable end, or a follower's min(leader's HW, LEO).
    fn consumer_hw(&self) -> Offset {
        self.qs
            .leader()
            .and_then(|l| l.high_watermark)
            .or(self.local_hw)
            .unwrap_or(self.log.start_offset())
    }

    // ----- ClientFetch -----

    pub(crate) fn on_client_fetch(&mut self, id: u64, fetch: ClientFetch, out: &mut Vec<Output>) {
        let offsets = match self.consumer_offsets(fetch.current_leader_epoch) {
            Ok(offsets) => offsets,
            Err(refused) => return self.consumer_refused(id, refused, out),
        };
        // Out of range against the log end, not the high watermark (Kafka's rule): a new leader's
        // HW can trail what its predecessor exposed, and a consumer there must wait, not reset.
        let leo = self.log.end_offset();
        if fetch.fetch_offset < offsets.log_start_offset || fetch.fetch_offset > leo {
            return self.consumer_out_of_range(id, out);
        }
        match self.check_last_fetched_epoch(&fetch) {
            EpochCheck::Consistent => {}
            EpochCheck::Diverging(d) => {
                return self.consumer_answer(id, ErrorCode::NONE, Some(d), Vec::new(), out)
            }
            EpochCheck::Unknown => return self.consumer_out_of_range(id, out),
        }
        let fetcher = Fetcher::Consumer {
            id,
            min_bytes: fetch.min_bytes,
            max_bytes: fetch.max_bytes.min(self.config.fetch_max_bytes),
        };
        let wait = fetch.max_wait_ms.min(self.config.fetch_max_wait_ms);
        let enough = self.committed_bytes_from(fetch.fetch_offset) >= fetch.min_bytes;
        if enough || wait == 0 || self.leading().parked_consumers() >= MAX_PARKED_CONSUMER_FETCHES {
            return self.serve_consumer(fetcher, fetch.fetch_offset, out);
        }
        let deadline = self.now + wait;
        self.park(fetcher, fetch.fetch_offset, deadline);
    }

    /// Fetch v12's divergence check for a consumer. Unlike a replica (told to truncate to 0), a
    /// consumer whose epoch predates the whole log is out of range, as Kafka answers.
    fn check_last_fetched_epoch(&self, fetch: &ClientFetch) -> EpochCheck {
        let Some(last) = fetch.last_fetched_epoch else {
            return EpochCheck::Consistent;
        };
        // At the log start the epoch of the batch before it is one retention may have taken
        // from the cache; everything below the start is committed, and a consumer reads only
        // that, so there is nothing to diverge from (docs/protocol.md, "Retention and the log
        // start").
        if fetch.fetch_offset == self.log.start_offset() && self.log.start_offset() > 0 {
            return EpochCheck::Consistent;
        }
        match self
            .log
            .epochs
            .end_offset_for_epoch(last, self.log.end_offset())
        {
            None => EpochCheck::Unknown,
            Some((found, end)) if found < last || end < fetch.fetch_offset => {
                EpochCheck::Diverging(OffsetAndEpoch {
                    offset: end,
                    epoch: found,
                })
            }
            Some(_) => EpochCheck::Consistent,
        }
    }

    /// Bytes of committed data from `from`: counted in the tail cache; data older than the
    /// cache counts as plenty (it is at least the cache's budget behind).
    pub(crate) fn committed_bytes_from(&self, from: Offset) -> usize {
        let hw = self.consumer_hw();
        if from >= hw {
            return 0;
        }
        self.log.tail.bytes_between(from, hw).unwrap_or(usize::MAX)
    }

    /// Answers a consumer now with what is committed from `from` (perhaps nothing).
    pub(crate) fn serve_consumer(&mut self, fetcher: Fetcher, from: Offset, out: &mut Vec<Output>) {
        if from < self.consumer_hw() {
            return self.respond_with_records(fetcher, from, out);
        }
        if let Fetcher::Consumer { id, .. } = fetcher {
            self.consumer_records(id, Vec::new(), out);
        }
    }

    /// The answer with data: only the batches wholly below the high watermark (read from the
    /// tail or the log, which may hold more), so the HW may have moved since the read began.
    pub(crate) fn consumer_records(&self, id: u64, mut batches: Vec<Batch>, out: &mut Vec<Output>) {
        let hw = self.consumer_hw();
        let committed = batches.partition_point(|b| b.end_offset() <= hw);
        debug_assert!(
            batches.get(committed).is_none_or(|b| b.base_offset >= hw),
            "high watermark {hw} inside batch {:?}",
            batches
                .get(committed)
                .map(|b| (b.base_offset, b.end_offset()))
        );
        batches.truncate(committed);
        self.consumer_answer(id, ErrorCode::NONE, None, batches, out);
    }

    /// OFFSET_OUT_OF_RANGE, with the log start in the answer: the consumer resets its offset.
    pub(crate) fn consumer_out_of_range(&self, id: u64, out: &mut Vec<Output>) {
        self.consumer_answer(id, ErrorCode::OFFSET_OUT_OF_RANGE, None, Vec::new(), out);
    }

    /// A leader's answer: its bounds and itself as the leader.
    fn consumer_answer(
        &self,
        id: u64,
        error: ErrorCode,
        diverging_epoch: Option<OffsetAndEpoch>,
        batches: Vec<Batch>,
        out: &mut Vec<Output>,
    ) {
        // Checked again when the answer is made, not only when the fetch came: a parked fetch
        // or a log read may end after the lease did (docs/consistency.md, "The leader lease").
        if !self.leads_for_clients() {
            return self.consumer_not_leader(id, out);
        }
        out.push(Output::ClientFetchDone {
            id,
            result: ClientFetchResult {
                error,
                high_watermark: self.consumer_hw(),
                log_start_offset: self.log.start_offset(),
                leader_id: self.qs.local_id(),
                leader_epoch: self.qs.epoch(),
                diverging_epoch,
                batches,
            },
        });
    }

    /// A leadership ended under a waiting consumer: it looks for the leader again.
    pub(crate) fn consumer_not_leader(&self, id: u64, out: &mut Vec<Output>) {
        self.consumer_refused(id, self.not_leader(), out);
    }

    fn consumer_refused(&self, id: u64, refused: ReadRefused, out: &mut Vec<Output>) {
        out.push(Output::ClientFetchDone {
            id,
            result: ClientFetchResult {
                error: refused.error_code(),
                high_watermark: -1,
                log_start_offset: -1,
                leader_id: refused.leader_id(),
                leader_epoch: refused.leader_epoch(),
                diverging_epoch: None,
                batches: Vec::new(),
            },
        });
    }
}
