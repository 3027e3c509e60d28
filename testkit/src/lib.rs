//! Local clusters of real `ringraft serve` processes on 127.0.0.1, for the process tests
//! (tools/tests) and the cluster benchmark (bench): free ports, node configs, spawning, bounded
//! waits for a leader or for the voters' offsets, graceful stops with exit statuses, what the
//! nodes wrote to stderr, and the leader among a list of servers; clusters whose nodes run in
//! network namespaces of their own, to be partitioned for real (netns). Every node process is killed
//! when its guard drops, and (PR_SET_PDEATHSIG) when the thread that started it ends.

pub mod certs;
mod cluster;
pub mod netns;
mod process;

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use net::client::BlockingClient;

pub use cluster::{
    mutual_tls_properties, node_properties, ClientTls, Cluster, LeaderWait, Node, Security,
    Settings, Stderr,
};
pub use net::client::resolve;
pub use process::{kill_with_parent, read_stderr, ProcessGuard};

/// `count` ports on 127.0.0.1 free at the time of asking (all held together so they differ).
///
/// They are drawn below the kernel's ephemeral range (`ip_local_port_range`), from a start
/// that differs per process and then in turn: a port the kernel picked for `bind(:0)` could be
/// handed out again, between our check and the node's bind, as the source port of some
/// outgoing connection (a load generator's, say), and the node would fail to start with
/// "Address already in use". Below that range only another explicit bind can take it. When the
/// range leaves no room below it, the kernel's own pick is used.
pub fn free_ports(count: usize) -> Result<Vec<u16>, String> {
    let (low, _) = ephemeral_range();
    let mut ports = Vec::with_capacity(count);
    let mut held = Vec::with_capacity(count);
    let mut tries = 0;
    while ports.len() < count {
        let port = match next_fixed_port(low) {
            Some(port) if tries < 64 * count + 64 => port,
            _ => 0,
        };
        tries += 1;
        match TcpListener::bind(("127.0.0.1", port)) {
            Ok(listener) => {
                let port = listener.local_addr().map_err(|e| e.to_string())?.port();
                if !ports.contains(&port) {
                    ports.push(port);
                    held.push(listener);
                }
            }
            Err(_) if port != 0 => {} // taken: the next one
            Err(e) => return Err(format!("no free port on 127.0.0.1: {e}")),
        }
    }
    Ok(ports)
}

/// Ports from here up to the ephemeral range are ours to draw.
const FIXED_PORTS_FROM: u16 = 10_000;

/// The kernel's range of source ports for outgoing connections (Linux's default when unread).
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut parts = text.split_whitespace().map(str::parse::<u16>);
            Some((parts.next()?.ok()?, parts.next()?.ok()?))
        })
        .unwrap_or((32_768, 60_999))
}

/// The next port in this process's turn through `[FIXED_PORTS_FROM, low)`, starting at an offset
/// drawn from the process id and the clock; None when there is no room below `low`.
fn next_fixed_port(low: u16) -> Option<u16> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(u64::MAX);
    let span = u64::from(low.checked_sub(FIXED_PORTS_FROM)?);
    if span < 1_024 {
        return None;
    }
    let start = || {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        (u64::from(std::process::id()) * 7_919 + u64::from(nanos)) % span
    };
    let _ = NEXT.compare_exchange(u64::MAX, start(), Ordering::Relaxed, Ordering::Relaxed);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Some(FIXED_PORTS_FROM + (n % span) as u16)
}

/// The leader among `servers` (`host:port,...`; the first whose DescribeQuorum answer is its
/// own, error NONE) and the number of voters it reports. `timeout` bounds each connection and
/// answer.
pub fn find_leader(servers: &str, timeout: Duration) -> Result<(SocketAddr, usize), String> {
    for server in servers.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let addr = resolve(server)?;
        let Ok(mut client) = BlockingClient::connect(addr, timeout) else {
            continue;
        };
        if let Ok(d) = client.describe_quorum() {
            if d.error.is_none() {
                return Ok((addr, d.current_voters.len()));
            }
        }
    }
    Err(format!(
        "no leader among {servers} (list the leader's address)"
    ))
}

/// The end of each node's stderr file (its last panic, or its last 20 lines), headed by the
/// node's id: what a process test prints when a cluster does not do what it should.
pub fn stderr_tails<'a>(nodes: impl IntoIterator<Item = (i32, &'a std::path::Path)>) -> String {
    nodes
        .into_iter()
        .map(|(id, stderr)| {
            let text = std::fs::read_to_string(stderr).unwrap_or_default();
            format!("node {id}:\n{}\n", tail(&text, 20, true))
        })
        .collect()
}

/// The end of `text`: from its last panic message on (without the backtrace) when `from_panic`
/// and there is one, else its last `lines` lines.
pub fn tail(text: &str, lines: usize, from_panic: bool) -> String {
    let all: Vec<&str> = text.lines().collect();
    match all.iter().rposition(|l| l.contains("panicked at")) {
        Some(panic) if from_panic => all[panic..]
            .iter()
            .take_while(|l| !l.starts_with("stack backtrace:"))
            .copied()
            .collect::<Vec<_>>()
            .join("\n"),
        _ => all[all.len().saturating_sub(lines)..].join("\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_differ() {
        let ports = free_ports(8).unwrap();
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 8, "{ports:?}");
    }

    /// The ports come from below the ephemeral range, so no outgoing connection's source port
    /// can take one before a node binds it; one held elsewhere is passed over.
    #[test]
    fn free_ports_lie_below_the_ephemeral_range_and_skip_taken_ones() {
        let (low, high) = ephemeral_range();
        assert!(low <= high);
        let taken = TcpListener::bind(("127.0.0.1", next_fixed_port(low).unwrap() + 1)).ok();
        let ports = free_ports(16).unwrap();
        assert_eq!(ports.len(), 16);
        for port in &ports {
            assert!(
                (FIXED_PORTS_FROM..low).contains(port),
                "{port} of {ports:?}"
            );
            // Free once free_ports let it go. Another test of this process may fork a child
            // just then, and the child holds a copy of the listener until its exec closes it
            // (CI saw "15256 is free" fail once): a bounded wait covers that window.
            let deadline = std::time::Instant::now() + Duration::from_secs(2);
            while TcpListener::bind(("127.0.0.1", *port)).is_err() {
                assert!(std::time::Instant::now() < deadline, "{port} is not free");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if let Some(taken) = taken {
            let port = taken.local_addr().unwrap().port();
            assert!(!ports.contains(&port), "{port} was held");
        }
    }

    #[test]
    fn a_tail_starts_at_the_last_panic_or_keeps_the_last_lines() {
        let text = "a\nb\nthread 'x' panicked at src/a.rs:1:1:\nboom\nstack backtrace:\n  0: f\n";
        assert_eq!(
            tail(text, 2, true),
            "thread 'x' panicked at src/a.rs:1:1:\nboom"
        );
        assert_eq!(tail(text, 2, false), "stack backtrace:\n  0: f");
        assert_eq!(tail("a\nb\nc", 2, true), "b\nc");
        assert_eq!(tail("", 2, true), "");
    }

    #[test]
    fn no_leader_among_servers_where_nothing_listens() {
        let port = free_ports(1).unwrap()[0];
        let error = find_leader(&format!("127.0.0.1:{port}"), Duration::from_secs(1)).unwrap_err();
        assert!(error.starts_with("no leader among 127.0.0.1:"), "{error}");
        assert!(find_leader("nocolon", Duration::from_secs(1))
            .unwrap_err()
            .contains("invalid socket address"));
    }
}
