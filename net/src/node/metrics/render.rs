//! The scrape: reads every cell of [`Sources`] and encodes the OpenMetrics text with
//! prometheus-client's encoder (a `Collector` over the cells: the library encodes, the threads
//! never call it). Names and meanings: docs/operations.md, "Metrics".

use std::fmt::Error as FmtError;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use engine::raft::ErrorCode;
use engine::stats::{HistogramSnapshot, LocalHistogram};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use super::{slot_error, Sources, API_SLOTS, ERROR_SLOTS, STATES};
use crate::node::api_table;

/// The whole exposition, `# EOF` included.
pub fn render(sources: &std::sync::Arc<Sources>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape(sources.clone())));
    let mut out = String::with_capacity(16 << 10);
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String does not fail");
    out
}

struct Scrape(std::sync::Arc<Sources>);

impl std::fmt::Debug for Scrape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scrape")
    }
}

type Labels<'a> = Vec<(&'static str, std::borrow::Cow<'a, str>)>;

/// One encoder session: a little vocabulary over prometheus-client's descriptor encoder.
struct Out<'e>(DescriptorEncoder<'e>);

impl Out<'_> {
    /// One gauge of any value type prometheus-client encodes (i64, f64).
    fn gauge<N>(&mut self, name: &str, help: &str, unit: Option<Unit>, v: N) -> Result<(), FmtError>
    where
        ConstGauge<N>: EncodeMetric,
    {
        let e = self
            .0
            .encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
        ConstGauge::new(v).encode(e)
    }

    /// One counter of any value type prometheus-client encodes (u64, f64).
    fn counter<N>(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        v: N,
    ) -> Result<(), FmtError>
    where
        ConstCounter<N>: EncodeMetric,
    {
        let e = self
            .0
            .encode_descriptor(name, help, unit.as_ref(), MetricType::Counter)?;
        ConstCounter::new(v).encode(e)
    }

    /// A counter family with one sample per `(label value, counter)` of `samples`, all under
    /// the one label name `label`.
    fn labelled_counters(
        &mut self,
        name: &str,
        help: &str,
        label: &'static str,
        samples: &[(&'static str, &AtomicU64)],
    ) -> Result<(), FmtError> {
        let mut e = self
            .0
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        for &(value, n) in samples {
            let labels = [(label, value)];
            ConstCounter::new(n.load(Relaxed)).encode(e.encode_family(&labels)?)?;
        }
        Ok(())
    }

    /// A histogram whose cells count in 1/`divisor` of the exported unit (1e6 for microseconds
    /// exported as seconds; dividing keeps the bounds' decimal forms short, 5.0e-5 not
    /// 0.0000499...).
    fn histogram(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        cells: &LocalHistogram,
        divisor: f64,
    ) -> Result<(), FmtError> {
        let HistogramSnapshot {
            buckets,
            count,
            sum,
        } = cells.snapshot();
        // The encoder accumulates: it takes each bucket's own count, the overflow last.
        let mut below = 0;
        let mut bounds: Vec<(f64, u64)> = buckets
            .iter()
            .map(|&(bound, cumulative)| {
                let own = cumulative - below;
                below = cumulative;
                (bound as f64 / divisor, own)
            })
            .collect();
        bounds.push((f64::INFINITY, count - below));
        let mut e = self
            .0
            .encode_descriptor(name, help, unit.as_ref(), MetricType::Histogram)?;
        e.encode_histogram::<NoLabelSet>(sum as f64 / divisor, count, &bounds, None)
    }
}

fn unit_seconds() -> Option<Unit> {
    Some(Unit::Seconds)
}

fn unit_bytes() -> Option<Unit> {
    Some(Unit::Bytes)
}

impl Collector for Scrape {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), FmtError> {
        let s = &*self.0;
        let r = &*s.raft;
        let mut out = Out(encoder);
        raft_state(&mut out, s)?;
        let now = r.now_ms();
        out.histogram(
            "ringraft_raft_commit_latency",
            "Kafka commit-latency-avg: time from a Produce with acks=all reaching the leader to \
             its commit (avg = sum / count)",
            unit_seconds(),
            &r.commit_latency_us,
            1e6,
        )?;
        out.gauge(
            "ringraft_raft_commit_latency_max",
            "Kafka commit-latency-max: the longest commit of the last 30 to 60 s",
            unit_seconds(),
            r.commit_latency_max_us.get(now) as f64 / 1e6,
        )?;
        out.histogram(
            "ringraft_raft_election_latency",
            "Kafka election-latency-avg: time from this node starting an election (pre-vote or \
             vote) to knowing a leader",
            unit_seconds(),
            &r.election_latency_ms,
            1e3,
        )?;
        out.gauge(
            "ringraft_raft_election_latency_max",
            "Kafka election-latency-max: the longest election of the last 30 to 60 s",
            unit_seconds(),
            r.election_latency_max_ms.get(now) as f64 / 1e3,
        )?;
        out.counter(
            "ringraft_raft_append_records",
            "Kafka append-records-rate as a counter: records the leader appended to its log",
            None,
            r.append_records.get(),
        )?;
        out.counter(
            "ringraft_raft_fetch_records",
            "Kafka fetch-records-rate as a counter: records a follower or observer fetched from \
             the leader and appended",
            None,
            r.fetch_records.get(),
        )?;
        out.counter(
            "ringraft_raft_poll_idle",
            "Kafka poll-idle-ratio-avg as a counter: time the raft thread spent waiting in \
             io_uring_enter (rate() of it is the idle ratio)",
            unit_seconds(),
            r.poll_idle_us.get() as f64 / 1e6,
        )?;
        out.gauge(
            "ringraft_raft_number_unknown_voter_connections",
            "Kafka number-unknown-voter-connections: other voters this node has no connected \
             outbound connection to",
            None,
            r.unknown_voter_connections.get(),
        )?;
        out.gauge(
            "ringraft_producer_snapshot_offset",
            "the committed offset of the newest producer-state snapshot written this run, -1 none",
            None,
            r.producer_snapshot_offset.get(),
        )?;
        out.counter(
            "ringraft_producer_snapshot_failures",
            "producer-state snapshots that could not be written (the node carries on; a start \
             without one reads the whole log)",
            None,
            r.producer_snapshot_failures.get(),
        )?;
        out.counter(
            "ringraft_raft_leader_changes",
            "times this node saw a new leader (etcd's leader_changes_seen)",
            None,
            r.leader_changes.get(),
        )?;
        out.counter(
            "ringraft_raft_wakeups",
            "returns of the raft thread from io_uring_enter",
            None,
            r.node.wakeups.get(),
        )?;
        out.counter(
            "ringraft_raft_log_reads",
            "fetches the in-memory tail could not answer, read from the log by the reader thread",
            None,
            r.node.log_reads.get(),
        )?;
        out.counter(
            "ringraft_raft_refused_messages",
            "peer messages the core refused: on admission, or answers of the wrong kind",
            None,
            r.node.refused_messages.get(),
        )?;
        replica_lags(&mut out, s)?;
        requests(&mut out, s)?;
        network(&mut out, s)?;
        disk(&mut out, s)?;
        memory(&mut out, s)?;
        startup(&mut out, s)
    }
}

fn raft_state(out: &mut Out, s: &Sources) -> Result<(), FmtError> {
    let r = &*s.raft;
    let state = r.state.get();
    {
        let mut e = out.0.encode_descriptor(
            "ringraft_raft_current_state",
            "Kafka current-state: 1 for this node's role, 0 for the others",
            None,
            MetricType::Gauge,
        )?;
        for (index, name) in STATES.iter().enumerate() {
            let labels = [("state", *name)];
            let family = e.encode_family(&labels)?;
            ConstGauge::new(i64::from(index as i64 == state)).encode(family)?;
        }
    }
    out.gauge(
        "ringraft_raft_current_leader",
        "Kafka current-leader: the leader's id, -1 when none is known",
        None,
        r.leader.get(),
    )?;
    out.gauge(
        "ringraft_raft_current_epoch",
        "Kafka current-epoch",
        None,
        r.epoch.get(),
    )?;
    out.gauge(
        "ringraft_raft_current_vote",
        "Kafka current-vote: the candidate this node voted for in its epoch, -1 when none",
        None,
        r.vote.get(),
    )?;
    out.gauge(
        "ringraft_raft_high_watermark",
        "Kafka high-watermark: the offset below which records are committed, -1 unknown",
        None,
        r.high_watermark.get(),
    )?;
    out.gauge(
        "ringraft_raft_log_end_offset",
        "Kafka log-end-offset",
        None,
        r.log_end_offset.get(),
    )?;
    out.gauge(
        "ringraft_node_id",
        "this node's id (broker.id)",
        None,
        i64::from(s.node_id),
    )
}

fn replica_lags(out: &mut Out, s: &Sources) -> Result<(), FmtError> {
    let lags = match s.raft.replica_lags.lock() {
        Ok(lags) => lags.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    {
        let mut e = out.0.encode_descriptor(
            "ringraft_raft_replica_lag_records",
            "leader only: records between the leader's log end and each voter's last fetch",
            None,
            MetricType::Gauge,
        )?;
        for lag in &lags {
            let labels: Labels = vec![("replica", lag.replica_id.to_string().into())];
            ConstGauge::new(lag.records).encode(e.encode_family(&labels)?)?;
        }
    }
    let unit = unit_seconds();
    let mut e = out.0.encode_descriptor(
        "ringraft_raft_replica_lag",
        "leader only: time since each voter last fetched up to the leader's end (no sample for \
         a voter that has not in this epoch)",
        unit.as_ref(),
        MetricType::Gauge,
    )?;
    for lag in &lags {
        if let Some(ms) = lag.ms_since_caught_up {
            let labels: Labels = vec![("replica", lag.replica_id.to_string().into())];
            ConstGauge::new(ms as f64 / 1e3).encode(e.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

fn api_name(slot: usize) -> std::borrow::Cow<'static, str> {
    let key = super::slot_api(slot);
    match api_table::row(key) {
        Some(row) => row.spec.name.into(),
        None => format!("api_{key}").into(),
    }
}

fn requests(out: &mut Out, s: &Sources) -> Result<(), FmtError> {
    let r = &*s.raft;
    {
        let mut e = out.0.encode_descriptor(
            "ringraft_requests",
            "requests received, by API (every API the node serves)",
            None,
            MetricType::Counter,
        )?;
        for key in 0..API_SLOTS {
            let n = r.requests[key].get();
            if n > 0 {
                let labels: Labels = vec![("api", api_name(key))];
                ConstCounter::new(n).encode(e.encode_family(&labels)?)?;
            }
        }
    }
    let mut e = out.0.encode_descriptor(
        "ringraft_responses",
        "responses by API and error code, for the APIs answering one error per request (the \
         quorum RPCs) or per partition (Produce)",
        None,
        MetricType::Counter,
    )?;
    for key in 0..API_SLOTS {
        for slot in 0..ERROR_SLOTS {
            let n = r.responses[key * ERROR_SLOTS + slot].get();
            if n == 0 {
                continue;
            }
            let code = ErrorCode(slot_error(slot));
            let error = match code.name() {
                Some(name) => name.to_string(),
                None if slot == ERROR_SLOTS - 1 => format!("CODE_{}_OR_ABOVE", code.0),
                None => format!("CODE_{}", code.0),
            };
            let labels: Labels = vec![("api", api_name(key)), ("error", error.into())];
            ConstCounter::new(n).encode(e.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

fn network(out: &mut Out, s: &Sources) -> Result<(), FmtError> {
    let n = &s.raft.node;
    out.gauge(
        "ringraft_connections_open",
        "inbound connections open (clients and peers)",
        None,
        s.raft.open_connections.get(),
    )?;
    out.counter(
        "ringraft_connections_accepted",
        "inbound connections accepted",
        None,
        n.accepted.get(),
    )?;
    out.counter(
        "ringraft_connections_refused",
        "inbound connections closed at once because the transport's connection limit was reached",
        None,
        n.refused_connections.get(),
    )?;
    out.counter(
        "ringraft_connections_refused_per_ip",
        "inbound connections closed at once because as many from the same address were open as max.connections.per.ip allows",
        None,
        n.refused_connections_per_ip.get(),
    )?;
    out.counter(
        "ringraft_network_received",
        "bytes received on every socket",
        unit_bytes(),
        n.bytes_received.get(),
    )?;
    out.counter(
        "ringraft_network_sent",
        "bytes sent on every socket",
        unit_bytes(),
        n.bytes_sent.get(),
    )?;
    out.counter(
        "ringraft_network_frames_received",
        "Kafka frames received",
        None,
        n.frames_received.get(),
    )
}

fn disk(out: &mut Out, s: &Sources) -> Result<(), FmtError> {
    let w = &*s.writer;
    out.histogram(
        "ringraft_disk_group_duration",
        "per group: the O_DIRECT write and its fdatasync, submit to durable (etcd's \
         wal_fsync_duration for a group commit)",
        unit_seconds(),
        &w.group_us,
        1e6,
    )?;
    out.histogram(
        "ringraft_disk_group",
        "per group: bytes of batches written",
        unit_bytes(),
        &w.group_bytes,
        1.0,
    )?;
    out.histogram(
        "ringraft_disk_group_batches",
        "per group: record batches written",
        None,
        &w.group_batches,
        1.0,
    )?;
    // Which `log.sync.mode` is in force, seen in what the writer did: with dsync, every group
    // but a zero-fill's or a split one's is durable by its write alone.
    out.labelled_counters(
        "ringraft_disk_groups",
        "groups written, by what made them durable: an fdatasync, or their RWF_DSYNC write \
         alone (log.sync.mode=dsync; docs/operations.md, \"Choosing the sync mode\")",
        "durable_by",
        &[
            ("fdatasync", &w.groups_fdatasynced),
            ("rwf_dsync", &w.groups_dsync_written),
        ],
    )?;
    out.counter(
        "ringraft_disk_written",
        "bytes of batches written to the log",
        unit_bytes(),
        w.batch_bytes.load(Relaxed),
    )?;
    out.counter(
        "ringraft_disk_device_written",
        "bytes submitted to the device (rewritten partial blocks, padding and zero-fill included)",
        unit_bytes(),
        w.device_bytes.load(Relaxed),
    )?;
    out.counter(
        "ringraft_disk_slow_groups",
        "groups whose write and fdatasync took 100 ms or more (each also logged)",
        None,
        w.slow_groups.load(Relaxed),
    )?;
    out.gauge(
        "ringraft_disk_storage_full",
        "1 while the log cannot allocate its next segment (appends refused with \
         KAFKA_STORAGE_ERROR; docs/operations.md, \"A full disk\"), else 0",
        None,
        w.storage_full.load(Relaxed) as i64,
    )?;
    out.counter(
        "ringraft_disk_storage_full_episodes",
        "times the log found its disk full (each also logged once)",
        None,
        w.storage_full_episodes.load(Relaxed),
    )?;
    // How the log came by its segment files and let them go: in a log at its retention size
    // every file should be recycled; allocations and deletions are what recycling avoids (each
    // deletion a discard on a filesystem mounted with `discard`).
    out.labelled_counters(
        "ringraft_log_segments",
        "segment files allocated fresh, recycled (a retired segment reused as the next), or \
         deleted (docs/storage.md, \"Recycling\")",
        "how",
        &[
            ("allocated", &w.segments_allocated),
            ("recycled", &w.segments_recycled),
            ("deleted", &w.segments_deleted),
        ],
    )?;
    out.counter(
        "ringraft_disk_batches_staged_during_write",
        "record batches copied for the next group while a group's write was in flight (the \
         copy overlapped the IO)",
        None,
        w.batches_staged_during_write.load(Relaxed),
    )?;
    out.counter(
        "ringraft_disk_submits_waited",
        "log operations that found the writer's queue full and waited",
        None,
        w.submits_waited.load(Relaxed),
    )?;
    out.counter(
        "ringraft_disk_reads",
        "catch-up reads the reader thread served",
        None,
        s.reader.reads.load(Relaxed),
    )?;
    out.counter(
        "ringraft_disk_read",
        "bytes the reader thread read for catch-up",
        unit_bytes(),
        s.reader.bytes.load(Relaxed),
    )
}

fn memory(out: &mut Out, s: &Sources) -> Result<(), FmtError> {
    out.gauge(
        "ringraft_tail_cache",
        "bytes of batches held by the in-memory tail cache",
        unit_bytes(),
        s.raft.tail_cache_bytes.get(),
    )?;
    out.gauge(
        "ringraft_sparse_index",
        "heap bytes of the segments' sparse offset indexes",
        unit_bytes(),
        i64::try_from(s.view.index_bytes()).unwrap_or(i64::MAX),
    )
}

fn startup(out: &mut Out, s: &Sources) -> Result<(), FmtError> {
    let st = &s.startup;
    if let Some(worst) = st.fdatasync_probe {
        out.gauge(
            "ringraft_startup_fdatasync_probe",
            "start-up check: the slowest of the sync probe's 4 KiB O_DIRECT write + fdatasync \
             cycles in log.dirs",
            unit_seconds(),
            worst.as_secs_f64(),
        )?;
    }
    if let Some(worst) = st.dsync_probe {
        out.gauge(
            "ringraft_startup_dsync_probe",
            "start-up check: the slowest of the sync probe's 4 KiB O_DIRECT writes with RWF_DSYNC \
             in log.dirs",
            unit_seconds(),
            worst.as_secs_f64(),
        )?;
    }
    if let Some(mode) = st.sync_mode {
        out.gauge(
            "ringraft_log_sync_dsync",
            "1 when the log writer makes groups durable with RWF_DSYNC writes, 0 with \
             fdatasync (log.sync.mode, or what auto chose at start)",
            None,
            i64::from(mode == engine::io::SyncMode::RwfDsync),
        )?;
    }
    if let Some(limit) = st.memlock_limit {
        out.gauge(
            "ringraft_startup_memlock_limit",
            "start-up check: RLIMIT_MEMLOCK (no sample when unlimited)",
            unit_bytes(),
            i64::try_from(limit).unwrap_or(i64::MAX),
        )?;
    }
    out.gauge(
        "ringraft_startup_memlock_sufficient",
        "start-up check: 1 when RLIMIT_MEMLOCK covers the buffers the log writer registers",
        None,
        i64::from(st.memlock_limit.is_none_or(|l| l >= st.memlock_needed)),
    )?;
    out.gauge(
        "ringraft_startup_memlock_needed",
        "start-up check: bytes of buffers the log writer registers with io_uring",
        unit_bytes(),
        i64::try_from(st.memlock_needed).unwrap_or(i64::MAX),
    )?;
    out.gauge(
        "ringraft_startup_registered_buffers",
        "1 when the log writer's buffers are registered with its ring, 0 when it fell back to \
         unregistered writes (RLIMIT_MEMLOCK too low)",
        None,
        i64::from(st.registered_buffers),
    )?;
    out.gauge(
        "ringraft_startup_o_direct",
        "start-up check: 1 when an O_DIRECT write in log.dirs succeeded",
        None,
        i64::from(st.o_direct),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::metrics::{RaftMetrics, StartupReport};
    use engine::io::{ReaderStats, WriterStats};
    use engine::log::{Log, LogConfig};
    use engine::raft::ReplicaLag;
    use std::sync::Arc;

    use crate::wire::api as net_api;

    fn sources(dir: &std::path::Path) -> Arc<Sources> {
        let log = Log::open(
            dir,
            LogConfig {
                segment_bytes: 1 << 20,
                ..LogConfig::default()
            },
        )
        .unwrap();
        Arc::new(Sources {
            node_id: 2,
            raft: Arc::new(RaftMetrics::default()),
            writer: Arc::new(WriterStats::default()),
            reader: Arc::new(ReaderStats::default()),
            view: log.view(),
            startup: StartupReport {
                fdatasync_probe: Some(std::time::Duration::from_micros(250)),
                dsync_probe: Some(std::time::Duration::from_micros(120)),
                sync_mode: Some(engine::io::SyncMode::RwfDsync),
                memlock_limit: None,
                memlock_needed: 3 << 20,
                o_direct: true,
                registered_buffers: true,
            },
        })
    }

    #[test]
    fn the_scrape_renders_what_the_threads_published() {
        let dir = tempfile::tempdir().unwrap();
        let s = sources(dir.path());
        let r = &s.raft;
        r.epoch.set(7);
        r.state.set(4); // leader
        r.leader.set(2);
        r.append_records.add(5);
        r.append_records.add(6);
        r.request(api_table::row(0).unwrap().spec.key);
        r.request(net_api::FETCH_QUORUM_RECORDS);
        r.response(net_api::FETCH_QUORUM_RECORDS, ErrorCode::NONE);
        r.response(0, ErrorCode::NONE);
        r.response(0, ErrorCode(6));
        r.response(0, ErrorCode(6));
        r.response(0, ErrorCode(i16::MAX));
        r.publish_lags(&[ReplicaLag {
            replica_id: 3,
            records: 12,
            ms_since_caught_up: None,
        }]);
        s.writer.group_us.observe(60);
        s.writer.group_us.observe(90);
        s.writer.group_us.observe(10_000_000);
        let text = render(&s);
        for line in [
            "ringraft_raft_current_epoch 7",
            "ringraft_raft_current_state{state=\"leader\"} 1",
            "ringraft_raft_current_state{state=\"follower\"} 0",
            "ringraft_raft_append_records_total 11",
            "ringraft_requests_total{api=\"Produce\"} 1",
            "ringraft_requests_total{api=\"FetchQuorumRecords\"} 1",
            "ringraft_responses_total{api=\"FetchQuorumRecords\",error=\"NONE\"} 1",
            "ringraft_responses_total{api=\"Produce\",error=\"NONE\"} 1",
            "ringraft_responses_total{api=\"Produce\",error=\"NOT_LEADER_OR_FOLLOWER\"} 2",
            "ringraft_responses_total{api=\"Produce\",error=\"CODE_126_OR_ABOVE\"} 1",
            "ringraft_raft_replica_lag_records{replica=\"3\"} 12",
            "ringraft_disk_group_duration_seconds_bucket{le=\"0.00005\"} 0",
            "ringraft_disk_group_duration_seconds_bucket{le=\"0.0001\"} 2",
            "ringraft_disk_group_duration_seconds_bucket{le=\"+Inf\"} 3",
            "ringraft_disk_group_duration_seconds_count 3",
            "ringraft_startup_memlock_sufficient 1",
            "ringraft_startup_registered_buffers 1",
            "ringraft_node_id 2",
            "# TYPE ringraft_raft_append_records counter",
            "# UNIT ringraft_disk_group_duration_seconds seconds",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in:\n{text}"
            );
        }
        assert!(text.ends_with("# EOF\n"));
        // A voter with no catch-up time has no lag-time sample (not measured, not exported).
        assert!(
            !text.contains("ringraft_raft_replica_lag_seconds{"),
            "{text}"
        );
    }
}
