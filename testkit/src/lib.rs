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
pub use process::{read_stderr, ProcessGuard};

/// `count` ports on 127.0.0.1 free at the time of asking (all held together so they differ).
pub fn free_ports(count: usize) -> Result<Vec<u16>, String> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())
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
