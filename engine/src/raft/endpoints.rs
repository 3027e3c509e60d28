//! Voter endpoints learned through FindQuorum (protocol.md 11): for each voter, the host, port
//! and boot timestamp it last advertised. A newer boot timestamp wins, so a voter that restarted
//! on another address replaces its stale entry, and an older advertisement never overwrites a
//! newer one.

use std::collections::BTreeMap;

use super::message::VoterEndpoint;
use super::types::NodeId;

#[derive(Debug, Default)]
pub(crate) struct EndpointTable {
    known: BTreeMap<NodeId, VoterEndpoint>,
}

impl EndpointTable {
    pub(crate) fn new(initial: &[VoterEndpoint]) -> Self {
        let mut table = Self::default();
        for endpoint in initial {
            table.learn(endpoint.clone());
        }
        table
    }

    /// Records `endpoint` if it names a host and is newer than what is known. True if it changed.
    pub(crate) fn learn(&mut self, endpoint: VoterEndpoint) -> bool {
        if endpoint.host.is_empty() || endpoint.port <= 0 {
            return false;
        }
        if let Some(known) = self.known.get(&endpoint.voter_id) {
            if known.boot_timestamp >= endpoint.boot_timestamp {
                return false;
            }
        }
        self.known.insert(endpoint.voter_id, endpoint);
        true
    }

    pub(crate) fn is_known(&self, id: NodeId) -> bool {
        self.known.contains_key(&id)
    }

    /// What is known of `id`, or an "unknown" entry (empty host, -1).
    pub(crate) fn get(&self, id: NodeId) -> VoterEndpoint {
        self.known.get(&id).cloned().unwrap_or(VoterEndpoint {
            voter_id: id,
            boot_timestamp: -1,
            host: String::new(),
            port: -1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(id: NodeId, boot: i64, host: &str) -> VoterEndpoint {
        VoterEndpoint {
            voter_id: id,
            boot_timestamp: boot,
            host: host.into(),
            port: 9093,
        }
    }

    #[test]
    fn newer_boot_wins_and_empty_hosts_are_ignored() {
        let mut t = EndpointTable::new(&[endpoint(1, 0, "a")]);
        assert!(!t.learn(endpoint(1, 0, "b")), "same boot: no change");
        assert!(t.learn(endpoint(1, 5, "b")));
        assert!(!t.learn(endpoint(1, 4, "c")), "older boot never overwrites");
        assert_eq!(t.get(1).host, "b");
        assert!(!t.learn(endpoint(2, 9, "")));
        assert!(!t.is_known(2));
        assert_eq!(t.get(2).port, -1);
    }
}
