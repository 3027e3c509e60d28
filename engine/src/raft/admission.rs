//! What a peer's message must satisfy before it may change anything (docs/protocol.md,
//! "Hostile input"). Every check here is a pure function of the message, the sender the
//! transport vouches for (if any) and this node's epoch and clock, so it runs before any
//! handler, before any state changes and before anything is persisted.
//!
//! The bounds exist because a well-formed message is not a trustworthy one: any process that can
//! reach a port and knows the cluster id (no secret) can send one. Without them one request with
//! an epoch of `i32::MAX` made every voter's next candidacy overflow, and a file at that epoch
//! made the node crash-loop. Until the transport authenticates voters the bounds only make such
//! damage slow and visible: it takes 2^11 messages, each logged, to use up the epoch space.

use super::error::ErrorCode;
use super::message::{
    AlterQuorumRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchQuorumRecordsRequest,
    FindQuorumRequest, Request, VoteRequest,
};
use super::types::{Epoch, NodeId, Offset, Sender};

/// How far ahead of this node's epoch a peer's epoch may be. A real cluster moves one epoch per
/// election; even a voter cut off for weeks and campaigning alone every election timeout (about
/// 1.5 s at the default timeouts) takes about 18 days to get 2^20 ahead. One hostile message can
/// move the epoch at most this far, so the space of 2^31 epochs takes at least 2^11 such
/// messages to use up (until the transport authenticates voters).
pub const MAX_EPOCH_JUMP: Epoch = 1 << 20;

/// The highest epoch a peer's message may carry: one that leaves room for another election.
/// (A node's own candidacy stops at `Epoch::MAX`, which peers refuse, so the last epoch a leader
/// can be elected in is this one.)
pub const MAX_PEER_EPOCH: Epoch = Epoch::MAX - 1;

/// A node whose epoch passes this tells the operator (once per start): no real cluster holds
/// 2^30 elections, so an epoch this high was pushed there, and what is left is finite.
pub const EPOCH_WARNING: Epoch = 1 << 30;

/// The highest offset a message may carry: 2^62 records is far beyond any real log, and any sum
/// of such an offset and a record count (u32) or a byte count fits in an i64.
pub const MAX_OFFSET: Offset = 1 << 62;

/// How far in the future of this node's clock a boot timestamp may be (ms). Clocks of hosts
/// kept by NTP agree within seconds; a boot timestamp beyond this is a lie, and believing it
/// would make every real restart of that voter look older forever.
pub const MAX_BOOT_SKEW_MS: i64 = 5 * 60 * 1000;

/// The most preferred successors an EndQuorumEpoch may name: more than any voter set.
pub const MAX_SUCCESSORS: usize = 1024;

/// The most target voters an AlterQuorum may name (the wire decoder refuses more too): far more
/// than any voter set, small enough that a hostile request costs nothing.
pub const MAX_TARGET_VOTERS: usize = 64;

/// The longest an AlterQuorum may ask the leader to wait for its target to commit (ms): an
/// admin client retries after REQUEST_TIMED_OUT (the request is an idempotent overwrite), so a
/// request never needs to hold the leader's attention for longer.
pub const MAX_ALTER_QUORUM_TIMEOUT_MS: i32 = 10 * 60 * 1000;

/// A message refused before it could change anything: the Kafka error to answer with (for a
/// request) and why, for the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub error: ErrorCode,
    pub reason: String,
}

impl Refusal {
    fn invalid(reason: String) -> Self {
        Refusal {
            error: ErrorCode::INVALID_REQUEST,
            reason,
        }
    }
}

/// This node's view that the checks compare against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Receiver {
    pub(crate) epoch: Epoch,
    /// Wall-clock ms since the Unix epoch, if this node knows it (the simulator does not).
    pub(crate) wall_clock_ms: Option<i64>,
}

/// An epoch a peer names, against this node's: never negative, never so far ahead that it is
/// implausible, never so close to the limit that no election would be left.
pub(crate) fn check_epoch(field: &str, epoch: Epoch, local: Epoch) -> Result<(), Refusal> {
    check_epoch_limit(field, epoch)?;
    if epoch > local.saturating_add(MAX_EPOCH_JUMP) {
        return Err(Refusal::invalid(format!(
            "{field} {epoch} is more than {MAX_EPOCH_JUMP} ahead of this node's epoch {local}"
        )));
    }
    Ok(())
}

/// An epoch in the range any message may name, whoever sent it: 0 ..= [`MAX_PEER_EPOCH`].
pub(crate) fn check_epoch_limit(field: &str, epoch: Epoch) -> Result<(), Refusal> {
    if epoch < 0 {
        return Err(Refusal::invalid(format!("{field} {epoch} is negative")));
    }
    if epoch > MAX_PEER_EPOCH {
        return Err(Refusal::invalid(format!(
            "{field} {epoch} leaves no room for another election"
        )));
    }
    Ok(())
}

fn check_offset(field: &str, offset: Offset, min: Offset) -> Result<(), Refusal> {
    if offset < min || offset > MAX_OFFSET {
        return Err(Refusal::invalid(format!(
            "{field} {offset} is outside {min}..={MAX_OFFSET}"
        )));
    }
    Ok(())
}

fn check_id(field: &str, id: NodeId, min: NodeId) -> Result<(), Refusal> {
    if id < min {
        return Err(Refusal::invalid(format!("{field} {id} is below {min}")));
    }
    Ok(())
}

/// When the transport proved who sent a message (`from`), the replica id the message claims
/// must be that sender: nobody speaks for another replica, and a principal that is no replica's
/// speaks for none.
fn check_identity(field: &str, claimed: NodeId, from: Sender) -> Result<(), Refusal> {
    let refuse = |who: String| {
        Err(Refusal {
            error: ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
            reason: format!("{field} {claimed} sent by {who}"),
        })
    };
    match from {
        Sender::Replica(sender) if claimed >= 0 && claimed != sender => {
            refuse(format!("node {sender}"))
        }
        Sender::NotAReplica if claimed >= 0 => refuse("a principal that is no replica's".into()),
        _ => Ok(()),
    }
}

/// Checks a request's fields. The cluster id is the handlers' business (they answer
/// INCONSISTENT_CLUSTER_ID), and so is everything that depends on more than these values.
pub(crate) fn admit_request(request: &Request, from: Sender, me: Receiver) -> Result<(), Refusal> {
    match request {
        Request::Vote(r) => admit_vote(r, from, me),
        Request::BeginQuorumEpoch(r) => admit_begin(r, from, me),
        Request::EndQuorumEpoch(r) => admit_end(r, from, me),
        Request::FetchQuorumRecords(r) => admit_fetch(r, from, me),
        Request::FindQuorum(r) => admit_find_quorum(r, from, me),
        Request::DescribeQuorum(_) => Ok(()),
        Request::AlterQuorum(r) => admit_alter_quorum(r),
    }
}

/// An AlterQuorum names a non-empty set of distinct, real node ids (a set may never be empty:
/// docs/protocol.md, "Driving the change"), and a timeout the leader can keep.
fn admit_alter_quorum(r: &AlterQuorumRequest) -> Result<(), Refusal> {
    let voters = &r.target_voters;
    if voters.is_empty() {
        return Err(Refusal::invalid("the target voter set is empty".into()));
    }
    if voters.len() > MAX_TARGET_VOTERS {
        return Err(Refusal::invalid(format!(
            "{} target voters (at most {MAX_TARGET_VOTERS})",
            voters.len()
        )));
    }
    for v in voters {
        check_id("target voter id", v.voter_id, 0)?;
    }
    let mut ids: Vec<NodeId> = voters.iter().map(|v| v.voter_id).collect();
    ids.sort_unstable();
    if let Some(pair) = ids.windows(2).find(|w| w[0] == w[1]) {
        return Err(Refusal::invalid(format!(
            "target voter {} is named twice",
            pair[0]
        )));
    }
    if !(0..=MAX_ALTER_QUORUM_TIMEOUT_MS).contains(&r.timeout_ms) {
        return Err(Refusal::invalid(format!(
            "timeout {} ms is outside 0..={MAX_ALTER_QUORUM_TIMEOUT_MS}",
            r.timeout_ms
        )));
    }
    Ok(())
}

fn admit_vote(r: &VoteRequest, from: Sender, me: Receiver) -> Result<(), Refusal> {
    check_id("candidate id", r.candidate_id, 0)?;
    check_epoch("candidate epoch", r.candidate_epoch, me.epoch)?;
    if r.last_epoch < 0 || r.last_epoch >= r.candidate_epoch {
        return Err(Refusal::invalid(format!(
            "last epoch {} is not in 0..{}",
            r.last_epoch, r.candidate_epoch
        )));
    }
    check_offset("last epoch end offset", r.last_epoch_end_offset, 0)?;
    check_identity("candidate id", r.candidate_id, from)
}

fn admit_begin(r: &BeginQuorumEpochRequest, from: Sender, me: Receiver) -> Result<(), Refusal> {
    check_id("leader id", r.leader_id, 0)?;
    check_epoch("leader epoch", r.leader_epoch, me.epoch)?;
    check_identity("leader id", r.leader_id, from)
}

fn admit_end(r: &EndQuorumEpochRequest, from: Sender, me: Receiver) -> Result<(), Refusal> {
    check_id("replica id", r.replica_id, 0)?;
    check_id("leader id", r.leader_id, -1)?;
    check_epoch("leader epoch", r.leader_epoch, me.epoch)?;
    if r.preferred_successors.len() > MAX_SUCCESSORS {
        return Err(Refusal::invalid(format!(
            "{} preferred successors (at most {MAX_SUCCESSORS})",
            r.preferred_successors.len()
        )));
    }
    if let Some(bad) = r.preferred_successors.iter().find(|s| **s < 0) {
        return Err(Refusal::invalid(format!("preferred successor {bad}")));
    }
    check_identity("replica id", r.replica_id, from)
}

fn admit_fetch(r: &FetchQuorumRecordsRequest, from: Sender, me: Receiver) -> Result<(), Refusal> {
    check_id("replica id", r.replica_id, -1)?;
    check_epoch("leader epoch", r.leader_epoch, me.epoch)?;
    check_offset("fetch offset", r.fetch_offset, 0)?;
    if r.last_fetched_epoch < 0 || r.last_fetched_epoch > r.leader_epoch {
        return Err(Refusal::invalid(format!(
            "last fetched epoch {} is not in 0..={}",
            r.last_fetched_epoch, r.leader_epoch
        )));
    }
    if r.max_wait_ms < 0 {
        return Err(Refusal::invalid(format!("max wait {} ms", r.max_wait_ms)));
    }
    check_offset("durable offset", r.durable_offset, -1)?;
    check_identity("replica id", r.replica_id, from)
}

fn admit_find_quorum(r: &FindQuorumRequest, from: Sender, me: Receiver) -> Result<(), Refusal> {
    check_id("replica id", r.replica_id, -1)?;
    if !(-1..=i32::from(u16::MAX)).contains(&r.port) {
        return Err(Refusal::invalid(format!("port {}", r.port)));
    }
    check_boot_timestamp(r.boot_timestamp, me)?;
    check_identity("replica id", r.replica_id, from)
}

/// A boot timestamp is a wall-clock time: not negative, and not later than this node's clock
/// allows for (when it knows its clock).
pub(crate) fn check_boot_timestamp(boot_timestamp: i64, me: Receiver) -> Result<(), Refusal> {
    if boot_timestamp < 0 {
        return Err(Refusal::invalid(format!(
            "boot timestamp {boot_timestamp} is negative"
        )));
    }
    if let Some(now) = me.wall_clock_ms {
        if boot_timestamp > now.saturating_add(MAX_BOOT_SKEW_MS) {
            return Err(Refusal::invalid(format!(
                "boot timestamp {boot_timestamp} is more than {MAX_BOOT_SKEW_MS} ms after this \
                 node's clock ({now})"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: Receiver = Receiver {
        epoch: 10,
        wall_clock_ms: Some(1_000_000),
    };

    #[test]
    fn epochs_are_bounded_relative_to_the_receiver_and_to_the_limit() {
        assert!(check_epoch("e", 10, 10).is_ok());
        assert!(
            check_epoch("e", 0, 10).is_ok(),
            "lower epochs are the handlers' business"
        );
        assert!(check_epoch("e", 10 + MAX_EPOCH_JUMP, 10).is_ok());
        assert!(check_epoch("e", 11 + MAX_EPOCH_JUMP, 10).is_err());
        assert!(check_epoch("e", -1, 10).is_err());
        assert!(check_epoch("e", Epoch::MAX, Epoch::MAX).is_err());
        assert!(check_epoch("e", Epoch::MAX, Epoch::MAX - 1).is_err());
        assert!(check_epoch("e", MAX_PEER_EPOCH, MAX_PEER_EPOCH).is_ok());
        // The receiver's own epoch near the limit must not overflow the comparison.
        assert!(check_epoch("e", MAX_PEER_EPOCH, Epoch::MAX).is_ok());
    }

    #[test]
    fn boot_timestamps_may_not_be_far_in_the_future_or_negative() {
        assert!(check_boot_timestamp(1_000_000 + MAX_BOOT_SKEW_MS, ME).is_ok());
        assert!(check_boot_timestamp(1_000_001 + MAX_BOOT_SKEW_MS, ME).is_err());
        assert!(check_boot_timestamp(i64::MAX, ME).is_err());
        assert!(check_boot_timestamp(-1, ME).is_err());
        let no_clock = Receiver {
            epoch: 1,
            wall_clock_ms: None,
        };
        assert!(check_boot_timestamp(i64::MAX, no_clock).is_ok());
    }

    #[test]
    fn the_bounds_hold_at_their_edges() {
        // Clocks may disagree by minutes, not by more (the decision in the module's docs).
        let minute = 60_000;
        assert!(check_boot_timestamp(1_000_000 + 4 * minute, ME).is_ok());
        assert!(check_boot_timestamp(1_000_000 + 6 * minute, ME).is_err());
        assert!(check_offset("o", MAX_OFFSET, 0).is_ok());
        assert!(check_offset("o", MAX_OFFSET + 1, 0).is_err());
        assert!(check_offset("o", 1 << 40, 0).is_ok(), "a large real log");
        assert!(check_offset("o", -1, -1).is_ok());
        assert!(check_offset("o", -2, -1).is_err());
        assert!(check_id("id", 0, 0).is_ok());
        assert!(check_id("id", -1, -1).is_ok());
        assert!(check_id("id", -2, -1).is_err());
        // A real cluster's epochs are far below the warning level.
        const { assert!(EPOCH_WARNING > 1 << 20) };
    }

    #[test]
    fn the_edge_values_an_honest_peer_may_send_are_admitted() {
        use crate::raft::message::*;
        let cluster_id = String::from("c");
        let end = |leader_id, successors: Vec<NodeId>| {
            Request::EndQuorumEpoch(EndQuorumEpochRequest {
                cluster_id: cluster_id.clone(),
                replica_id: 0,
                leader_id,
                leader_epoch: 10,
                preferred_successors: successors,
            })
        };
        // A candidate ends an epoch with no leader (-1); node 0 is a real id; a full list.
        assert!(admit_request(&end(-1, vec![0]), Sender::Unverified, ME).is_ok());
        assert!(admit_request(&end(0, vec![0; MAX_SUCCESSORS]), Sender::Unverified, ME).is_ok());
        assert!(
            admit_request(&end(0, vec![0; MAX_SUCCESSORS + 1]), Sender::Unverified, ME).is_err()
        );
        // An anonymous fetch (replica -1) that does not wait; replica 0.
        for replica_id in [-1, 0] {
            let fetch = Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
                cluster_id: cluster_id.clone(),
                replica_id,
                leader_epoch: 10,
                fetch_offset: 0,
                last_fetched_epoch: 0,
                is_follower: false,
                max_wait_ms: 0,
                durable_offset: -1,
                replica_directory_id: Default::default(),
                lease_echo: None,
            });
            assert!(
                admit_request(&fetch, Sender::Unverified, ME).is_ok(),
                "replica {replica_id}"
            );
        }
        // A FindQuorum that advertises nothing (replica -1, port -1, boot timestamp 0), and one
        // that advertises port 0 (the OS's pick) or the highest port.
        for (replica_id, port, boot_timestamp) in [(-1, -1, 0), (0, 0, 1), (1, 65_535, 1)] {
            let find = Request::FindQuorum(FindQuorumRequest {
                cluster_id: cluster_id.clone(),
                replica_id,
                boot_timestamp,
                host: String::new(),
                port,
            });
            assert!(
                admit_request(&find, Sender::Unverified, ME).is_ok(),
                "port {port}"
            );
        }
        let find = Request::FindQuorum(FindQuorumRequest {
            cluster_id,
            replica_id: 1,
            boot_timestamp: 1,
            host: String::new(),
            port: 65_536,
        });
        assert!(admit_request(&find, Sender::Unverified, ME).is_err());
    }

    #[test]
    fn an_alter_quorum_names_distinct_real_voters_and_a_keepable_timeout() {
        use crate::raft::message::AlterQuorumRequest;
        use crate::raft::types::DirectoryId;
        let alter = |ids: &[NodeId], timeout_ms| {
            let voters = ids.iter().map(|id| (*id, DirectoryId::ZERO));
            Request::AlterQuorum(AlterQuorumRequest::new("c", voters, timeout_ms))
        };
        let admit = |r: &Request| admit_request(r, Sender::Unverified, ME);
        assert!(admit(&alter(&[0, 1, 2], 0)).is_ok());
        assert!(admit(&alter(&[5], MAX_ALTER_QUORUM_TIMEOUT_MS)).is_ok());
        let many: Vec<NodeId> = (0..MAX_TARGET_VOTERS as NodeId).collect();
        assert!(admit(&alter(&many, 1000)).is_ok());
        let too_many: Vec<NodeId> = (0..=MAX_TARGET_VOTERS as NodeId).collect();
        for (bad, why) in [
            (alter(&[], 1000), "empty"),
            (alter(&[1, 2, 1], 1000), "twice"),
            (alter(&[1, -1], 1000), "below"),
            (alter(&[1], -1), "timeout"),
            (alter(&[1], MAX_ALTER_QUORUM_TIMEOUT_MS + 1), "timeout"),
            (alter(&too_many, 1000), "at most"),
        ] {
            let refusal = admit(&bad).unwrap_err();
            assert_eq!(refusal.error, ErrorCode::INVALID_REQUEST);
            assert!(refusal.reason.contains(why), "{}", refusal.reason);
        }
    }

    #[test]
    fn a_known_sender_may_not_speak_for_another_replica() {
        let e = check_identity("replica id", 2, Sender::Replica(3)).unwrap_err();
        assert_eq!(e.error, ErrorCode::CLUSTER_AUTHORIZATION_FAILED);
        assert!(check_identity("replica id", 3, Sender::Replica(3)).is_ok());
        assert!(check_identity("replica id", 2, Sender::Unverified).is_ok());
        assert!(
            check_identity("replica id", -1, Sender::Replica(3)).is_ok(),
            "anonymous fetch"
        );
    }

    #[test]
    fn a_principal_that_is_no_replicas_speaks_for_none() {
        for claimed in [0, 2, MAX_PEER_EPOCH] {
            let e = check_identity("replica id", claimed, Sender::NotAReplica).unwrap_err();
            assert_eq!(e.error, ErrorCode::CLUSTER_AUTHORIZATION_FAILED);
        }
        assert!(check_identity("replica id", -1, Sender::NotAReplica).is_ok());
        use crate::raft::message::*;
        let fetch = Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
            cluster_id: "c".into(),
            replica_id: 2,
            leader_epoch: 10,
            fetch_offset: 0,
            last_fetched_epoch: 0,
            is_follower: true,
            max_wait_ms: 0,
            durable_offset: -1,
            replica_directory_id: Default::default(),
            lease_echo: None,
        });
        assert_eq!(
            admit_request(&fetch, Sender::NotAReplica, ME)
                .unwrap_err()
                .error,
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED
        );
        assert_eq!(
            Sender::Replica(4).replica(),
            Some(4),
            "the peer a refusal names"
        );
        assert_eq!(Sender::NotAReplica.replica(), None);
    }
}
