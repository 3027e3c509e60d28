//! `--idle-connections N`: before the measured load, N connections to the leader's client
//! listener, each completing an ApiVersions exchange (so the node has accepted it and set it up
//! as a client connection), then left open and idle through the whole run beside the loaded
//! connections. The report says how many were opened, refused or failed, how many were still
//! open at the end (the node closes no idle connection: a closed one is an error), and the
//! leader's RSS before opening them, after, and at the end (docs/benchmarks.md, "Observers and
//! idle connections").

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use net::client::{BlockingClient, ClientError};
use serde::Serialize;
use testkit::ClientTls;

use crate::proc_sample;

/// Most `--idle-connections`.
pub const MAX_IDLE_CONNECTIONS: usize = 65_536;
/// File descriptors this process keeps for everything but the idle connections (its load
/// connections come on top).
const FD_RESERVE: u64 = 256;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Opening stops (the rest counted as not tried) after this long.
const OPEN_DEADLINE: Duration = Duration::from_secs(120);
/// ApiVersions v3, what Kafka's clients send first.
const API_VERSIONS_VERSION: i16 = 3;
/// Error messages kept for the report.
const ERRORS_KEPT: usize = 10;

/// What the idle connections did, for the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IdleReport {
    /// `--idle-connections`.
    pub requested: usize,
    /// Connected and answered ApiVersions: open at the start of the run.
    pub opened: usize,
    /// Connected, then closed by the node before it answered ApiVersions (end of file or
    /// reset): what the node does with a connection over its connection limit.
    pub refused: usize,
    /// Any other failure: connect error or timeout, an ApiVersions timeout or error answer.
    pub failed: usize,
    /// Not attempted: opening took over 120 s, or the run was interrupted.
    pub not_tried: usize,
    /// Seconds taken to open them (one after another).
    pub open_sec: f64,
    /// Of `opened`: still open after the load, and closed by the node during the run.
    pub open_at_end: usize,
    pub closed_during_run: usize,
    /// The first 10 errors, as they came.
    pub errors: Vec<String>,
    /// This process's soft RLIMIT_NOFILE before and after raising it to the hard limit (the
    /// nodes it starts inherit the raised one).
    pub nofile_limit_before: u64,
    pub nofile_limit: u64,
    /// The leader's VmRSS before opening them, after (before the load) and after the load.
    /// Null when this run did not start the cluster.
    pub leader_rss_kib_before: Option<u64>,
    pub leader_rss_kib_after_open: Option<u64>,
    pub leader_rss_kib_end: Option<u64>,
    /// (after_open - before) / opened: the leader's memory per idle connection, KiB.
    pub rss_kib_per_connection: Option<f64>,
}

impl IdleReport {
    /// The run's error when not every connection asked for was open from start to end.
    pub fn shortfall(&self) -> Option<String> {
        let missing = self.refused + self.failed + self.not_tried;
        if missing == 0 && self.closed_during_run == 0 {
            return None;
        }
        Some(format!(
            "idle connections: {} of {} asked for were not opened ({} refused by the node, {} \
             failed, {} not tried) and {} closed during the run; first errors: {:?}",
            missing,
            self.requested,
            self.refused,
            self.failed,
            self.not_tried,
            self.closed_during_run,
            self.errors
        ))
    }

    pub fn summary(&self) -> String {
        let kib = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        format!(
            "  idle connections: {} asked, {} opened in {:.1} s ({} refused by the node, {} \
             failed, {} not tried), {} still open after the load ({} closed); leader RSS KiB {} \
             before, {} after opening ({} KiB per connection), {} at the end",
            self.requested,
            self.opened,
            self.open_sec,
            self.refused,
            self.failed,
            self.not_tried,
            self.open_at_end,
            self.closed_during_run,
            kib(self.leader_rss_kib_before),
            kib(self.leader_rss_kib_after_open),
            self.rss_kib_per_connection
                .map_or("-".to_string(), |v| format!("{v:.2}")),
            kib(self.leader_rss_kib_end),
        )
    }
}

/// The connections held open, and their report so far.
pub struct IdleConnections {
    clients: Vec<BlockingClient>,
    pub report: IdleReport,
}

/// Raises this process's soft RLIMIT_NOFILE to its hard limit (to `fs.nr_open` when the hard
/// limit is unlimited); returns the soft limit before and after.
pub fn raise_nofile_limit() -> Result<(u64, u64), String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(format!(
            "getrlimit(RLIMIT_NOFILE): {}",
            std::io::Error::last_os_error()
        ));
    }
    let before = limit.rlim_cur;
    let mut target = limit.rlim_max;
    if target == libc::RLIM_INFINITY {
        target = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1 << 20);
    }
    if target > before {
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(format!(
                "setrlimit(RLIMIT_NOFILE, {target}): {}",
                std::io::Error::last_os_error()
            ));
        }
        return Ok((before, target));
    }
    Ok((before, before))
}

/// Fails when `count` idle connections and `connections` loaded ones do not fit the soft
/// open-file limit `nofile` (raised already) with a reserve, or the local port range.
pub fn check_fits(count: usize, connections: usize, nofile: u64) -> Result<(), String> {
    let needed = count as u64 + connections as u64 + FD_RESERVE;
    if needed > nofile {
        return Err(format!(
            "--idle-connections {count}: with --connections {connections} this process (and \
             the leader) needs about {needed} file descriptors, and the open-file limit is \
             {nofile} even after raising the soft limit to the hard one: raise the hard limit \
             (`ulimit -Hn` as root, LimitNOFILE=) or ask for fewer"
        ));
    }
    if let Some(ports) = local_ports() {
        if count as u64 + connections as u64 > ports {
            return Err(format!(
                "--idle-connections {count}: every connection to the leader needs a local port \
                 of its own, and net.ipv4.ip_local_port_range holds {ports}"
            ));
        }
    }
    Ok(())
}

/// How many ports net.ipv4.ip_local_port_range holds.
fn local_ports() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut range = text.split_whitespace().map(|p| p.parse::<u64>().ok());
    let (low, high) = (range.next()??, range.next()??);
    Some(high.saturating_sub(low) + 1)
}

enum Failure {
    /// The node closed it before answering.
    Refused(String),
    Failed(String),
}

/// A connection closed by the peer shows as end of file or a reset; through TLS only in the
/// handshake error's text.
fn classify(error: ClientError) -> Failure {
    let closed_kind = |kind: std::io::ErrorKind| {
        use std::io::ErrorKind::*;
        matches!(
            kind,
            UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe
        )
    };
    let text = error.to_string();
    let closed = match &error {
        ClientError::Io { source, .. } if closed_kind(source.kind()) => true,
        ClientError::Io { source, .. } if source.kind() == std::io::ErrorKind::Other => {
            let lower = text.to_lowercase();
            lower.contains("tls handshake")
                && ["eof", "reset", "broken pipe", "aborted"]
                    .iter()
                    .any(|w| lower.contains(w))
        }
        _ => false,
    };
    if closed {
        Failure::Refused(text)
    } else {
        Failure::Failed(text)
    }
}

fn open_one(leader: SocketAddr, tls: Option<&ClientTls>) -> Result<BlockingClient, Failure> {
    let mut client = match tls {
        Some(tls) => BlockingClient::connect_tls(
            leader,
            CONNECT_TIMEOUT,
            tls.config.clone(),
            &tls.server_name,
        ),
        None => BlockingClient::connect(leader, CONNECT_TIMEOUT),
    }
    .map_err(|e| match e {
        // A TCP connect that fails is never the node's limit (it accepts, then closes).
        ClientError::Io { ref source, .. } if source.kind() != std::io::ErrorKind::Other => {
            Failure::Failed(e.to_string())
        }
        e => classify(e),
    })?;
    let answer = client
        .api_versions(API_VERSIONS_VERSION)
        .map_err(classify)?;
    if !answer.error.is_none() {
        return Err(Failure::Failed(format!(
            "ApiVersions answered {:?}",
            answer.error
        )));
    }
    client.shrink_buffers();
    Ok(client)
}

fn rss_of(pid: Option<u32>) -> Option<u64> {
    pid.and_then(proc_sample::sample).map(|s| s.rss_kib)
}

/// Opens `count` connections to `leader` one after another (each connect bounded at 5 s, all at
/// 120 s), sampling `leader_pid`'s RSS before and after.
pub fn open(
    leader: SocketAddr,
    tls: Option<&ClientTls>,
    count: usize,
    leader_pid: Option<u32>,
    nofile: (u64, u64),
    interrupted: &AtomicBool,
) -> IdleConnections {
    let mut report = IdleReport {
        requested: count,
        nofile_limit_before: nofile.0,
        nofile_limit: nofile.1,
        leader_rss_kib_before: rss_of(leader_pid),
        ..IdleReport::default()
    };
    let mut clients = Vec::with_capacity(count);
    let started = Instant::now();
    for i in 0..count {
        if interrupted.load(Ordering::Relaxed) || started.elapsed() >= OPEN_DEADLINE {
            report.not_tried = count - i;
            break;
        }
        match open_one(leader, tls) {
            Ok(client) => clients.push(client),
            Err(Failure::Refused(e)) => {
                report.refused += 1;
                note(&mut report.errors, e);
            }
            Err(Failure::Failed(e)) => {
                report.failed += 1;
                note(&mut report.errors, e);
            }
        }
    }
    report.open_sec = started.elapsed().as_secs_f64();
    report.opened = clients.len();
    report.leader_rss_kib_after_open = rss_of(leader_pid);
    report.rss_kib_per_connection = per_connection(
        report.leader_rss_kib_before,
        report.leader_rss_kib_after_open,
        report.opened,
    );
    IdleConnections { clients, report }
}

fn note(errors: &mut Vec<String>, error: String) {
    if errors.len() < ERRORS_KEPT {
        errors.push(error);
    }
}

/// (after - before) / opened, KiB; None without both readings or with nothing opened.
pub fn per_connection(before: Option<u64>, after: Option<u64>, opened: usize) -> Option<f64> {
    let (before, after) = (before?, after?);
    (opened > 0).then(|| (after as f64 - before as f64) / opened as f64)
}

impl IdleConnections {
    /// After the load: which are still open (none should have been closed), the leader's RSS;
    /// then closes them all.
    pub fn finish(mut self, leader_pid: Option<u32>) -> IdleReport {
        let mut closed = 0;
        for client in &mut self.clients {
            if client.closed_by_peer_now(Duration::from_millis(100)) {
                closed += 1;
            }
        }
        self.report.closed_during_run = closed;
        self.report.open_at_end = self.clients.len() - closed;
        if closed > 0 {
            note(
                &mut self.report.errors,
                format!("{closed} idle connections found closed by the node after the load"),
            );
        }
        self.report.leader_rss_kib_end = rss_of(leader_pid);
        self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_per_connection_is_the_growth_over_the_count() {
        assert_eq!(per_connection(Some(1000), Some(1400), 8), Some(50.0));
        assert_eq!(per_connection(Some(1000), Some(996), 8), Some(-0.5));
        assert_eq!(per_connection(Some(1000), Some(1400), 0), None);
        assert_eq!(per_connection(None, Some(1400), 8), None);
    }

    #[test]
    fn too_many_for_the_open_file_limit_is_refused_up_front() {
        let error = check_fits(10_000, 16, 4096).unwrap_err();
        assert!(error.contains("open-file limit is 4096"), "{error}");
        assert!(check_fits(100, 16, 4096).is_ok());
    }

    #[test]
    fn a_shortfall_or_a_closed_connection_is_an_error() {
        let mut report = IdleReport {
            requested: 8,
            opened: 8,
            open_at_end: 8,
            ..IdleReport::default()
        };
        assert_eq!(report.shortfall(), None);
        report.closed_during_run = 1;
        assert!(report
            .shortfall()
            .unwrap()
            .contains("1 closed during the run"));
        report.closed_during_run = 0;
        report.refused = 2;
        assert!(report
            .shortfall()
            .unwrap()
            .contains("2 refused by the node"));
    }

    #[test]
    fn end_of_file_and_reset_count_as_refused_a_timeout_does_not() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let io = |kind: std::io::ErrorKind| ClientError::Io {
            addr,
            source: kind.into(),
        };
        assert!(matches!(
            classify(io(std::io::ErrorKind::UnexpectedEof)),
            Failure::Refused(_)
        ));
        assert!(matches!(
            classify(io(std::io::ErrorKind::ConnectionReset)),
            Failure::Refused(_)
        ));
        assert!(matches!(
            classify(io(std::io::ErrorKind::WouldBlock)),
            Failure::Failed(_)
        ));
        let tls = ClientError::Io {
            addr,
            source: std::io::Error::other("TLS handshake: tls handshake eof"),
        };
        assert!(matches!(classify(tls), Failure::Refused(_)));
    }
}
