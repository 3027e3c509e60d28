//! Voter endpoints learned through FindQuorum (docs/protocol.md section 9): for each voter, the
//! host, port and boot timestamp it last advertised. A newer boot timestamp wins, so a voter that
//! restarted on another address replaces its stale entry, and an older advertisement never
//! overwrites a newer one.
//!
//! An advertisement is only a claim: anybody can send a FindQuorum naming any voter id. So a new
//! advertisement becomes a *candidate*, probed on a connection of its own, and is used only once
//! the endpoint answers with that advertisement for itself (same voter id, host and port, and
//! the same boot timestamp or a newer one). Until then the known endpoint stays in use.

use std::collections::BTreeMap;

use super::message::VoterEndpoint;
use super::types::{Correlation, NodeId};

/// Candidates being probed for one voter: enough for a real restart to get through while a
/// stray process advertises others, few enough to bound the probes.
const MAX_CANDIDATES_PER_VOTER: usize = 4;
/// Candidates being probed in all.
const MAX_CANDIDATES: usize = 64;

#[derive(Debug, Default)]
pub(crate) struct EndpointTable {
    known: BTreeMap<NodeId, VoterEndpoint>,
    /// Probe correlation -> the advertisement it checks.
    candidates: BTreeMap<Correlation, VoterEndpoint>,
}

fn names_an_address(endpoint: &VoterEndpoint) -> bool {
    !endpoint.host.is_empty() && (1..=i32::from(u16::MAX)).contains(&endpoint.port)
}

impl EndpointTable {
    /// The endpoints configured at start (`quorum.voters`) are trusted as they are.
    pub(crate) fn new(initial: &[VoterEndpoint]) -> Self {
        let mut table = Self::default();
        for endpoint in initial {
            table.confirm(endpoint);
        }
        table
    }

    /// True if `endpoint` is worth probing: it names an address, is newer than what is known of
    /// its voter, is not being probed already, and the probe limits leave room.
    pub(crate) fn worth_probing(&self, endpoint: &VoterEndpoint) -> bool {
        if !names_an_address(endpoint) {
            return false;
        }
        if let Some(known) = self.known.get(&endpoint.voter_id) {
            if known.boot_timestamp >= endpoint.boot_timestamp {
                return false;
            }
        }
        let mut same_voter = 0;
        for candidate in self.candidates.values() {
            if candidate == endpoint {
                return false;
            }
            same_voter += usize::from(candidate.voter_id == endpoint.voter_id);
        }
        same_voter < MAX_CANDIDATES_PER_VOTER && self.candidates.len() < MAX_CANDIDATES
    }

    /// A probe for `endpoint` was sent under `correlation`.
    pub(crate) fn probing(&mut self, correlation: Correlation, endpoint: VoterEndpoint) {
        debug_assert!(self.worth_probing(&endpoint));
        self.candidates.insert(correlation, endpoint);
    }

    /// The probe under `correlation` finished (answered or failed): its candidate, if any.
    pub(crate) fn probe_done(&mut self, correlation: Correlation) -> Option<VoterEndpoint> {
        self.candidates.remove(&correlation)
    }

    /// Uses `endpoint` for its voter if it is newer than what is known. True if the voter's
    /// address is new or changed (the driver must connect there).
    pub(crate) fn confirm(&mut self, endpoint: &VoterEndpoint) -> bool {
        if !names_an_address(endpoint) {
            return false;
        }
        let moved = match self.known.get(&endpoint.voter_id) {
            Some(known) if known.boot_timestamp >= endpoint.boot_timestamp => return false,
            Some(known) => known.host != endpoint.host || known.port != endpoint.port,
            None => true,
        };
        self.known.insert(endpoint.voter_id, endpoint.clone());
        moved
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
        assert!(
            !t.worth_probing(&endpoint(1, 0, "b")),
            "same boot: no change"
        );
        assert!(t.worth_probing(&endpoint(1, 5, "b")));
        assert!(t.confirm(&endpoint(1, 5, "b")));
        assert!(
            !t.worth_probing(&endpoint(1, 4, "c")),
            "older boot never overwrites"
        );
        assert!(!t.confirm(&endpoint(1, 4, "c")));
        assert_eq!(t.get(1).host, "b");
        assert!(!t.worth_probing(&endpoint(2, 9, "")));
        assert!(!t.confirm(&endpoint(2, 9, "")));
        assert!(!t.is_known(2));
        assert_eq!(
            (t.get(2).port, t.get(2).boot_timestamp),
            (-1, -1),
            "unknown"
        );
        let mut bad_port = endpoint(2, 9, "h");
        bad_port.port = 70_000;
        assert!(!t.worth_probing(&bad_port));
    }

    #[test]
    fn a_restart_on_the_same_address_is_no_move() {
        let mut t = EndpointTable::new(&[endpoint(1, 0, "a")]);
        assert!(!t.confirm(&endpoint(1, 7, "a")), "same host and port");
        assert_eq!(t.get(1).boot_timestamp, 7);
    }

    #[test]
    fn candidates_are_probed_once_each_and_bounded() {
        let mut t = EndpointTable::new(&[endpoint(1, 0, "a")]);
        for (c, boot) in (1..=4).zip(10..) {
            let e = endpoint(1, boot, "x");
            assert!(t.worth_probing(&e));
            t.probing(c, e.clone());
            assert!(!t.worth_probing(&e), "already being probed");
        }
        assert!(
            !t.worth_probing(&endpoint(1, 99, "y")),
            "four per voter at most"
        );
        assert!(
            t.worth_probing(&endpoint(2, 1, "y")),
            "other voters still can"
        );
        assert_eq!(t.probe_done(1), Some(endpoint(1, 10, "x")));
        assert_eq!(t.probe_done(1), None);
        assert!(t.worth_probing(&endpoint(1, 99, "y")));
        assert_eq!(
            t.get(1).host,
            "a",
            "nothing confirmed: still the old endpoint"
        );
    }

    #[test]
    fn candidates_in_all_are_bounded() {
        let mut t = EndpointTable::default();
        let mut correlation = 0;
        for voter in 0.. {
            let e = endpoint(voter, 1, "x");
            if !t.worth_probing(&e) {
                break;
            }
            correlation += 1;
            t.probing(correlation, e);
        }
        assert_eq!(t.candidates.len(), MAX_CANDIDATES);
    }
}
