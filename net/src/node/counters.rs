//! What the raft thread counts while it runs, logged as one `node stats` line at a graceful
//! stop. These are the figures performance work needs (docs/architecture.md, "Costs per
//! commit"): how many wake-ups (one `io_uring_enter` each) a batch costs, how large the
//! writer's groups are, and how often a fetch is answered from the in-memory tail rather than
//! a log read. Plain integers owned by one thread: counting costs an add.

use std::fmt;

use engine::io::WriterStats;
use std::sync::atomic::Ordering;

use crate::transport::Stats as TransportStats;

#[derive(Debug, Default, Clone, Copy)]
pub struct NodeCounters {
    /// Returns from the event loop's poll: one `io_uring_enter` each.
    pub wakeups: u64,
    /// Completions handed to the node (frames, accepts, closes, timers, watches).
    pub events: u64,
    /// Produce requests received, and record batches in them.
    pub produce_requests: u64,
    pub produce_batches: u64,
    /// FetchQuorumRecords responses sent that carried batches, and the batches they carried.
    pub fetch_data_responses: u64,
    pub fetch_batches: u64,
    /// Reads the core asked of the writer because a fetch fell behind the in-memory tail.
    pub log_reads: u64,
    /// Peer messages the core refused (`Output::Refused`): on admission, or answers of the
    /// wrong kind (docs/protocol.md, "Hostile input").
    pub refused: u64,
    /// Kafka Fetch partitions the core answered (consumers' reads, docs/clients.md).
    pub consumer_fetches: u64,
    /// Steps of ListOffsets timestamp lookups the reader thread ran (docs/clients.md).
    pub timestamp_lookups: u64,
}

impl NodeCounters {
    /// Fraction of data-carrying fetch responses answered without a log read (1.0 when none
    /// were sent). A read serves exactly one response, so the difference counts tail hits.
    pub fn tail_hit_rate(&self) -> f64 {
        if self.fetch_data_responses == 0 {
            return 1.0;
        }
        let hits = self.fetch_data_responses.saturating_sub(self.log_reads);
        hits as f64 / self.fetch_data_responses as f64
    }
}

/// The counters of one node at one moment: its own, the transport's and the writer's.
pub struct NodeStatsLine<'a> {
    pub node: &'a NodeCounters,
    pub transport: TransportStats,
    pub writer: &'a WriterStats,
}

impl fmt::Display for NodeStatsLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.node;
        let groups = self.writer.groups.load(Ordering::Relaxed);
        let batches = self.writer.batches.load(Ordering::Relaxed);
        let batch_bytes = self.writer.batch_bytes.load(Ordering::Relaxed);
        let device_bytes = self.writer.device_bytes.load(Ordering::Relaxed);
        let max_group_us = self.writer.max_group_us.load(Ordering::Relaxed);
        let slow_groups = self.writer.slow_groups.load(Ordering::Relaxed);
        let per_group = |x: u64| {
            if groups == 0 {
                0.0
            } else {
                x as f64 / groups as f64
            }
        };
        // Batches this node stored: produced ones on a leader, fetched ones on a follower.
        let per_batch = |x: u64| {
            if batches == 0 {
                0.0
            } else {
                x as f64 / batches as f64
            }
        };
        write!(
            f,
            "wakeups={} events={} wakeups_per_batch={:.2} produce_requests={} produce_batches={} \
             fetch_data_responses={} fetch_batches={} log_reads={} tail_hit_rate={:.4} \
             writer_groups={groups} writer_batches={batches} batches_per_group={:.2} \
             bytes_per_group={:.0} device_bytes_per_batch_byte={:.3} \
             max_group_us={max_group_us} slow_groups={slow_groups} frames_received={} \
             bytes_received={} bytes_sent={} sends={} partial_sends={} refused={} \
             consumer_fetches={} timestamp_lookups={}",
            n.wakeups,
            n.events,
            per_batch(n.wakeups),
            n.produce_requests,
            n.produce_batches,
            n.fetch_data_responses,
            n.fetch_batches,
            n.log_reads,
            n.tail_hit_rate(),
            per_group(batches),
            per_group(batch_bytes),
            if batch_bytes == 0 {
                0.0
            } else {
                device_bytes as f64 / batch_bytes as f64
            },
            self.transport.frames_received,
            self.transport.bytes_received,
            self.transport.bytes_sent,
            self.transport.sends,
            self.transport.partial_sends,
            n.refused,
            n.consumer_fetches,
            n.timestamp_lookups,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_hit_rate_counts_responses_without_a_read() {
        let mut c = NodeCounters::default();
        assert_eq!(c.tail_hit_rate(), 1.0);
        c.fetch_data_responses = 10;
        c.log_reads = 3;
        assert!((c.tail_hit_rate() - 0.7).abs() < 1e-9);
        c.log_reads = 12; // reads still in flight at the stop
        assert_eq!(c.tail_hit_rate(), 0.0);
    }

    #[test]
    fn the_line_derives_group_sizes_from_the_writer() {
        let writer = WriterStats::default();
        writer.groups.store(4, Ordering::Relaxed);
        writer.batches.store(10, Ordering::Relaxed);
        writer.batch_bytes.store(40_000, Ordering::Relaxed);
        writer.device_bytes.store(48_000, Ordering::Relaxed);
        let node = NodeCounters {
            wakeups: 25,
            ..Default::default()
        };
        let line = NodeStatsLine {
            node: &node,
            transport: TransportStats::default(),
            writer: &writer,
        }
        .to_string();
        assert!(line.contains("batches_per_group=2.50"), "{line}");
        assert!(line.contains("bytes_per_group=10000"), "{line}");
        assert!(line.contains("device_bytes_per_batch_byte=1.200"), "{line}");
        assert!(line.contains("wakeups_per_batch=2.50"), "{line}");
    }
}
