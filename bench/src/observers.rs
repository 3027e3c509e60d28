//! `--observers N`: N observers (nodes outside the voter set, `bootstrap.servers` only, each
//! with an empty log) started with the cluster, before the prefill and the measured load, that
//! fetch the log from the leader (FetchQuorumRecords) through the whole run, as every broker of
//! a Kafka cluster follows the metadata quorum. The report gives each one's lag, the leader's
//! high watermark minus the observer's log end offset as the leader's DescribeQuorum reports
//! them, at the window's start and end, and whether each reached the high watermark once the
//! load had stopped (docs/benchmarks.md, "Observers and idle connections").

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use testkit::{ClientTls, Cluster};

use crate::catch_up;

/// Most `--observers`: each is a `ringraft serve` process on this machine's cores.
pub const MAX_OBSERVERS: usize = 64;
/// Default `--observer-max-lag`, in offsets.
pub const DEFAULT_MAX_LAG: i64 = 10_000;
/// How long to wait for the leader to list every observer (its first fetch), and after the load
/// for every observer to reach the high watermark.
const LISTED_WAIT: Duration = Duration::from_secs(30);
const CAUGHT_UP_WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(50);

/// What the observers did, for the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ObserversReport {
    /// `--observers`.
    pub count: usize,
    /// Their node ids (after the voters').
    pub ids: Vec<i32>,
    /// Seconds from starting them until the leader listed every one (each had fetched).
    pub listed_sec: Option<f64>,
    /// `--observer-max-lag`: the bound `all_within_max_lag_at_end` checks, in offsets.
    pub max_lag: i64,
    /// The leader's high watermark at the measured window's start and end.
    pub high_watermark_start: Option<i64>,
    pub high_watermark_end: Option<i64>,
    pub per_observer: Vec<ObserverLag>,
    /// Every observer listed at the window's end with a lag of at most `max_lag` (null with no
    /// observers, or when the leader did not answer).
    pub all_within_max_lag_at_end: Option<bool>,
    /// After the load stopped: every observer reached the high watermark within 10 s, and how
    /// long that took (null with no observers or after an interrupt).
    pub caught_up_after_load: Option<bool>,
    pub caught_up_after_load_sec: Option<f64>,
}

/// One observer's position as the leader saw it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ObserverLag {
    pub id: i32,
    /// Its log end offset (the offset of its last fetch) at the window's start and end; null
    /// when the leader did not list it.
    pub log_end_offset_start: Option<i64>,
    pub log_end_offset_end: Option<i64>,
    /// The high watermark minus that, at the same moments (0 when the observer is ahead of the
    /// high watermark: it fetches up to the leader's log end).
    pub lag_start: Option<i64>,
    pub lag_end: Option<i64>,
}

/// The high watermark minus an observer's log end offset, never below 0.
pub fn lag(high_watermark: i64, log_end_offset: Option<i64>) -> Option<i64> {
    log_end_offset.map(|offset| (high_watermark - offset).max(0))
}

impl ObserversReport {
    pub fn new(ids: Vec<i32>, max_lag: i64) -> Self {
        ObserversReport {
            count: ids.len(),
            per_observer: ids
                .iter()
                .map(|&id| ObserverLag {
                    id,
                    ..ObserverLag::default()
                })
                .collect(),
            ids,
            max_lag,
            ..ObserversReport::default()
        }
    }

    /// Asks the leader for its high watermark and the observers' log end offsets, and records
    /// each observer's offset and lag in the two fields `window` picks. The high watermark; None
    /// with no observers, or when the leader did not answer (then nothing is recorded).
    fn sample(
        &mut self,
        leader: SocketAddr,
        tls: Option<&ClientTls>,
        window: fn(&mut ObserverLag) -> (&mut Option<i64>, &mut Option<i64>),
    ) -> Option<i64> {
        if self.ids.is_empty() {
            return None;
        }
        let (hw, offsets) = catch_up::sample_observers(leader, tls, &self.ids)?;
        for (observer, offset) in self.per_observer.iter_mut().zip(offsets) {
            let (log_end_offset, observer_lag) = window(observer);
            *log_end_offset = offset;
            *observer_lag = lag(hw, offset);
        }
        Some(hw)
    }

    /// At the measured window's start.
    pub fn window_started(&mut self, leader: SocketAddr, tls: Option<&ClientTls>) {
        let hw = self.sample(leader, tls, |o| {
            (&mut o.log_end_offset_start, &mut o.lag_start)
        });
        if hw.is_some() {
            self.high_watermark_start = hw;
        }
    }

    /// At the measured window's end (the load still running).
    pub fn window_ended(&mut self, leader: SocketAddr, tls: Option<&ClientTls>) {
        let hw = self.sample(leader, tls, |o| (&mut o.log_end_offset_end, &mut o.lag_end));
        if hw.is_some() {
            self.high_watermark_end = hw;
            self.all_within_max_lag_at_end = Some(self.within_bound());
        }
    }

    fn within_bound(&self) -> bool {
        self.per_observer
            .iter()
            .all(|o| o.lag_end.is_some_and(|lag| lag <= self.max_lag))
    }

    /// After the load: waits (at most 10 s) until every observer's log end offset is at the
    /// high watermark.
    pub fn wait_caught_up(
        &mut self,
        leader: SocketAddr,
        tls: Option<&ClientTls>,
        interrupted: &AtomicBool,
    ) {
        if self.ids.is_empty() {
            return;
        }
        let started = Instant::now();
        while !interrupted.load(Ordering::Relaxed) {
            let caught_up = catch_up::sample_observers(leader, tls, &self.ids)
                .is_some_and(|(hw, offsets)| offsets.iter().all(|o| o.is_some_and(|o| o >= hw)));
            if caught_up {
                self.caught_up_after_load = Some(true);
                self.caught_up_after_load_sec = Some(started.elapsed().as_secs_f64());
                return;
            }
            if started.elapsed() >= CAUGHT_UP_WAIT {
                self.caught_up_after_load = Some(false);
                return;
            }
            std::thread::sleep(POLL);
        }
    }

    /// The summary's line (None with no observers).
    pub fn summary(&self) -> Option<String> {
        if self.ids.is_empty() {
            return None;
        }
        let text = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        let lags: Vec<String> = self
            .per_observer
            .iter()
            .map(|o| format!("{}: {}", o.id, text(o.lag_end)))
            .collect();
        Some(format!(
            "  observers: {}; lag at the window's end in offsets (id: lag) [{}], high watermark \
             {}; all within {}: {}; at the high watermark after the load: {}",
            self.count,
            lags.join(", "),
            text(self.high_watermark_end),
            self.max_lag,
            match self.all_within_max_lag_at_end {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "-",
            },
            match (self.caught_up_after_load, self.caught_up_after_load_sec) {
                (Some(true), Some(sec)) => format!("yes, {sec:.2} s after it stopped"),
                (Some(false), _) => format!("NO, not within {} s", CAUGHT_UP_WAIT.as_secs()),
                _ => "-".into(),
            }
        ))
    }
}

/// Starts `count` observers of the first `voters` nodes ([`crate::cluster_bench::start_observer`],
/// ids after the nodes already there) and waits (at most 30 s) until the leader lists every one, failing early with
/// its stderr when a node exits; returns their ids and the seconds waited.
pub fn start(
    cluster: &mut Cluster,
    voters: usize,
    count: usize,
    leader: SocketAddr,
    interrupted: &AtomicBool,
) -> Result<(Vec<i32>, f64), String> {
    let started = Instant::now();
    let ids = (0..count)
        .map(|_| crate::cluster_bench::start_observer(cluster, voters))
        .collect::<Result<Vec<i32>, String>>()?;
    let tls = cluster.client_tls.clone();
    loop {
        cluster.check_running()?;
        let listed = catch_up::sample_observers(leader, tls.as_ref(), &ids)
            .is_some_and(|(_, offsets)| offsets.iter().all(Option::is_some));
        if listed {
            return Ok((ids, started.elapsed().as_secs_f64()));
        }
        if interrupted.load(Ordering::Relaxed) {
            return Err("interrupted while the observers started".into());
        }
        if started.elapsed() >= LISTED_WAIT {
            let tails: Vec<String> = ids
                .iter()
                .map(|&id| format!("node {id}:\n{}", cluster.stderr_tail(id)))
                .collect();
            return Err(format!(
                "the leader did not list every observer within {LISTED_WAIT:?}; their last \
                 stderr lines:\n{}",
                tails.join("\n")
            ));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_the_high_watermark_minus_the_end_and_never_negative() {
        assert_eq!(lag(100, Some(40)), Some(60));
        assert_eq!(lag(100, Some(100)), Some(0));
        assert_eq!(lag(100, Some(130)), Some(0));
        assert_eq!(lag(100, None), None);
    }

    #[test]
    fn the_bound_needs_every_observer_listed_and_within_it() {
        let mut report = ObserversReport::new(vec![4, 5], 10);
        report.per_observer[0].lag_end = Some(10);
        report.per_observer[1].lag_end = Some(3);
        assert!(report.within_bound());
        report.per_observer[1].lag_end = Some(11);
        assert!(!report.within_bound());
        report.per_observer[1].lag_end = None;
        assert!(!report.within_bound());
        assert!(ObserversReport::new(Vec::new(), 10).summary().is_none());
    }
}
