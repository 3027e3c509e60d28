//! The liar: a Byzantine-lite process that knows the cluster id and sends well-formed but
//! hostile requests (and stray responses) to live nodes. See docs/simulation.md, "The liar".
//!
//! It is not a voter or an observer of the cluster. The simulated network knows who really
//! sent a message, so the liar's requests arrive with `from: Some(LIAR_ID)` whatever id they
//! claim inside (the authenticated transport the core relies on to refuse spoofed ids). Its
//! field values mix the plausible (the target's epoch and log end, give or take one) with the
//! extremes a careless `+ 1` or cast cannot take.
//!
//! Every choice goes through [`Draw`], so the same generator runs on the simulation's seeded
//! RNG (a seed still replays exactly) and on a fuzzer's bytes (`sim::script`).

use crate::raft::{
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, Correlation, DescribeQuorumRequest,
    DescribeQuorumResponse, EndQuorumEpochRequest, EndQuorumEpochResponse, Epoch, ErrorCode,
    FetchQuorumRecordsRequest, FetchQuorumRecordsResponse, FindQuorumRequest, FindQuorumResponse,
    NodeId, Offset, ReplicaState, Request, Response, VoteRequest, VoteResponse, VoterEndpoint,
};

use super::rng::SimRng;

/// The liar's node id: outside the simulated cluster (voters and observers are `0..V+O`).
pub const LIAR_ID: NodeId = 1000;

/// How far ahead of the receiver an epoch may be before it is suspicious (the core's bound).
const EPOCH_JUMP: Epoch = 1 << 20;

/// The longest `preferred_successors` list the liar sends.
const MAX_SUCCESSORS: usize = 10_000;

/// Where the liar's choices come from.
pub trait Draw {
    /// A choice in `0..n` (`n > 0`).
    fn pick(&mut self, n: usize) -> usize;
    /// 64 arbitrary bits.
    fn bits(&mut self) -> u64;
}

impl Draw for SimRng {
    fn pick(&mut self, n: usize) -> usize {
        self.index(n)
    }
    fn bits(&mut self) -> u64 {
        self.next_u64()
    }
}

/// Choices read from a byte string (a fuzzer's input). Once the bytes run out every choice
/// is 0, so any input, however short, is a complete script.
#[derive(Clone, Debug)]
pub struct ByteDraw<'a> {
    rest: &'a [u8],
}

impl<'a> ByteDraw<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next `width` bytes as a little-endian number (missing bytes read as 0).
    fn take(&mut self, width: usize) -> u64 {
        let k = width.min(self.rest.len());
        let (head, tail) = self.rest.split_at(k);
        self.rest = tail;
        head.iter()
            .rev()
            .fold(0, |acc, &b| (acc << 8) | u64::from(b))
    }
}

impl Draw for ByteDraw<'_> {
    fn pick(&mut self, n: usize) -> usize {
        assert!(n > 0);
        // As few bytes as the choice needs, so small choices stay one byte for the mutator.
        let max = (n - 1) as u64;
        let width = (64 - max.leading_zeros() as usize).div_ceil(8);
        (self.take(width) % n as u64) as usize
    }
    fn bits(&mut self) -> u64 {
        self.take(8)
    }
}

/// What the liar knows about its target when it lies (everything a peer could observe).
#[derive(Clone, Debug)]
pub struct TargetView {
    pub node: NodeId,
    pub cluster_id: String,
    pub epoch: Epoch,
    pub last_epoch: Epoch,
    pub log_end: Offset,
    /// The voters the target knows (empty for an observer that has not learned them yet).
    pub voters: Vec<NodeId>,
    /// Nodes in the cluster: ids `0..nodes`.
    pub nodes: usize,
    /// The cluster uses pre-vote: Vote lies are pre-votes half the time (no draw otherwise, so
    /// runs without pre-vote replay as before it existed).
    pub pre_vote: bool,
}

/// One hostile input.
#[derive(Clone, Debug)]
pub enum Lie {
    /// Delivered with `from: Some(LIAR_ID)`.
    Request(Request),
    /// Delivered as [`crate::raft::Input::Response`] as if `from` answered request
    /// `correlation` of the target, which it never sent.
    Response {
        from: NodeId,
        correlation: Correlation,
        response: Response,
    },
}

/// A request most of the time, now and then a stray response.
pub fn lie(d: &mut impl Draw, v: &TargetView) -> Lie {
    if d.pick(8) == 7 {
        Lie::Response {
            from: voter(d, v),
            correlation: correlation(d),
            response: response(d, v),
        }
    } else {
        Lie::Request(request(d, v))
    }
}

pub fn request(d: &mut impl Draw, v: &TargetView) -> Request {
    match d.pick(6) {
        0 => Request::Vote(VoteRequest {
            cluster_id: cluster_id(d, v),
            candidate_epoch: epoch(d, v),
            candidate_id: node_id(d, v),
            last_epoch: log_epoch(d, v),
            last_epoch_end_offset: offset(d, v),
            pre_vote: v.pre_vote && d.pick(2) == 1,
            // A liar does not know the directories: as a node older than them would send.
            candidate_directory_id: Default::default(),
            voter_directory_id: Default::default(),
        }),
        1 => Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
            cluster_id: cluster_id(d, v),
            leader_id: node_id(d, v),
            leader_epoch: epoch(d, v),
        }),
        2 => Request::EndQuorumEpoch(EndQuorumEpochRequest {
            cluster_id: cluster_id(d, v),
            replica_id: node_id(d, v),
            leader_id: node_id(d, v),
            leader_epoch: epoch(d, v),
            preferred_successors: successors(d, v),
        }),
        3 => Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
            cluster_id: cluster_id(d, v),
            replica_id: node_id(d, v),
            leader_epoch: epoch(d, v),
            fetch_offset: offset(d, v),
            last_fetched_epoch: log_epoch(d, v),
            is_follower: d.pick(2) == 1,
            max_wait_ms: max_wait_ms(d),
            durable_offset: offset(d, v),
            replica_directory_id: Default::default(),
            lease_echo: None,
        }),
        4 => Request::FindQuorum(FindQuorumRequest {
            cluster_id: cluster_id(d, v),
            replica_id: node_id(d, v),
            boot_timestamp: timestamp(d),
            host: host(d),
            port: port(d),
        }),
        _ => Request::DescribeQuorum(DescribeQuorumRequest {}),
    }
}

/// A response of any kind with hostile fields; it answers nothing the target asked.
pub fn response(d: &mut impl Draw, v: &TargetView) -> Response {
    let error = error_code(d);
    let leader_id = node_id(d, v);
    let leader_epoch = epoch(d, v);
    match d.pick(6) {
        0 => Response::Vote(VoteResponse {
            error,
            leader_id,
            leader_epoch,
            vote_granted: d.pick(2) == 1,
        }),
        1 => Response::BeginQuorumEpoch(BeginQuorumEpochResponse {
            error,
            leader_id,
            leader_epoch,
        }),
        2 => Response::EndQuorumEpoch(EndQuorumEpochResponse {
            error,
            leader_id,
            leader_epoch,
        }),
        3 => Response::FetchQuorumRecords(FetchQuorumRecordsResponse {
            error,
            leader_id,
            leader_epoch,
            next_fetch_offset: offset(d, v),
            next_fetch_offset_epoch: log_epoch(d, v),
            batches: Vec::new(),
            high_watermark: offset(d, v),
            first_dirty_offset: offset(d, v),
            last_caught_up_time_ms: timestamp(d),
            log_start: None,
            producer_state: None,
            lease_stamp: None,
        }),
        4 => Response::FindQuorum(FindQuorumResponse {
            error,
            cluster_id: cluster_id(d, v),
            leader_id,
            leader_epoch,
            voters: vec![VoterEndpoint {
                voter_id: node_id(d, v),
                boot_timestamp: timestamp(d),
                host: host(d),
                port: port(d),
            }],
            target_voters: None,
        }),
        _ => Response::DescribeQuorum(DescribeQuorumResponse {
            error,
            leader_id,
            leader_epoch,
            high_watermark: offset(d, v),
            current_voters: vec![ReplicaState {
                replica_id: node_id(d, v),
                directory_id: crate::base::DirectoryId::ZERO,
                log_end_offset: offset(d, v),
                last_fetch_timestamp: timestamp(d),
                last_caught_up_timestamp: timestamp(d),
            }],
            target_voters: None,
            observers: Vec::new(),
        }),
    }
}

// ---------------------------------------------------------------- field values

/// An epoch near the target's, or at the edges of the core's epoch arithmetic and bounds.
pub fn epoch(d: &mut impl Draw, v: &TargetView) -> Epoch {
    let e = v.epoch;
    match d.pick(13) {
        0 => e.saturating_sub(1),
        1 => e,
        2 => e.saturating_add(1),
        3 => e.saturating_add(2),
        4 => e.saturating_add(EPOCH_JUMP - 1),
        5 => e.saturating_add(EPOCH_JUMP),
        6 => e.saturating_add(EPOCH_JUMP + 1),
        7 => Epoch::MAX,
        8 => Epoch::MAX - 1,
        9 => Epoch::MIN,
        10 => -1,
        11 => 0,
        _ => d.bits() as Epoch,
    }
}

/// The epoch of a log position (a candidate's last epoch, a fetcher's last fetched epoch):
/// the target's own half the time, so a lie can pass the log comparison.
pub fn log_epoch(d: &mut impl Draw, v: &TargetView) -> Epoch {
    match d.pick(4) {
        0 => v.last_epoch,
        1 => v.last_epoch.saturating_add(1),
        _ => epoch(d, v),
    }
}

/// An offset at the target's log end, give or take one, or at the edges.
pub fn offset(d: &mut impl Draw, v: &TargetView) -> Offset {
    let end = v.log_end;
    match d.pick(10) {
        0 => -2,
        1 => -1,
        2 => 0,
        3 => end.saturating_sub(1),
        4 => end,
        5 => end.saturating_add(1),
        6 => Offset::MAX,
        7 => Offset::MIN,
        8 => 1 << 62,
        _ => d.bits() as Offset,
    }
}

/// A sender or leader id: the liar's own, a real node's (spoofing), the target's, or nonsense.
pub fn node_id(d: &mut impl Draw, v: &TargetView) -> NodeId {
    match d.pick(8) {
        0 => LIAR_ID,
        1 | 2 => voter(d, v),
        3 => d.pick(v.nodes.max(1)) as NodeId,
        4 => v.node,
        5 => -1,
        6 => -2,
        _ => NodeId::MAX,
    }
}

/// One of the voters the target knows (voter 0 when it knows none yet): the id a spoofed
/// request claims, or the peer a stray response pretends to come from.
fn voter(d: &mut impl Draw, v: &TargetView) -> NodeId {
    if v.voters.is_empty() {
        0
    } else {
        v.voters[d.pick(v.voters.len())]
    }
}

/// Empty, the real voters, one id many times, or a huge list of anything.
pub fn successors(d: &mut impl Draw, v: &TargetView) -> Vec<NodeId> {
    match d.pick(4) {
        0 => Vec::new(),
        1 => v.voters.clone(),
        2 => {
            let id = node_id(d, v);
            vec![id; 1 + d.pick(8)]
        }
        _ => {
            let len = d.pick(MAX_SUCCESSORS + 1);
            (0..len).map(|_| node_id(d, v)).collect()
        }
    }
}

/// Mostly the right cluster id (the liar knows it), so lies get past the first check.
pub fn cluster_id(d: &mut impl Draw, v: &TargetView) -> String {
    match d.pick(8) {
        0 => String::new(),
        1 => "not-the-cluster".to_owned(),
        _ => v.cluster_id.clone(),
    }
}

pub fn max_wait_ms(d: &mut impl Draw) -> i32 {
    *choose(d, &[-1, 0, 1, 100, i32::MAX, i32::MIN])
}

pub fn port(d: &mut impl Draw) -> i32 {
    *choose(d, &[-5, 0, 9093, 70_000, i32::MAX, i32::MIN])
}

pub fn timestamp(d: &mut impl Draw) -> i64 {
    *choose(d, &[i64::MAX, i64::MIN, -1, 0, 1_700_000_000_000])
}

pub fn host(d: &mut impl Draw) -> String {
    match d.pick(3) {
        0 => String::new(),
        1 => "liar.invalid".to_owned(),
        _ => "h".repeat(300),
    }
}

pub fn error_code(d: &mut impl Draw) -> ErrorCode {
    *choose(
        d,
        &[
            ErrorCode::NONE,
            ErrorCode::FENCED_LEADER_EPOCH,
            ErrorCode::UNKNOWN_LEADER_EPOCH,
            ErrorCode::NOT_LEADER_OR_FOLLOWER,
            ErrorCode::INCONSISTENT_CLUSTER_ID,
            ErrorCode::INVALID_REQUEST,
            ErrorCode(i16::MAX),
            ErrorCode(i16::MIN),
        ],
    )
}

/// A correlation id the target never used: the edges, or 64 random bits (the core's ids are
/// 48-bit counters, so a random one matches an outstanding request with odds near 2^-64).
pub fn correlation(d: &mut impl Draw) -> Correlation {
    match d.pick(4) {
        0 => 0,
        1 => Correlation::MAX,
        _ => d.bits(),
    }
}

fn choose<'t, T>(d: &mut impl Draw, options: &'t [T]) -> &'t T {
    &options[d.pick(options.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> TargetView {
        TargetView {
            node: 1,
            cluster_id: "c".to_owned(),
            epoch: 7,
            last_epoch: 6,
            log_end: 40,
            voters: vec![0, 1, 2],
            nodes: 4,
            pre_vote: true,
        }
    }

    #[test]
    fn byte_draw_reads_little_endian_and_zero_once_empty() {
        let mut d = ByteDraw::new(&[5, 0xe9, 0x03, 7]);
        assert_eq!(d.pick(10), 5);
        // Two bytes for a choice among 1000: 0x03e9 = 1001, wrapped.
        assert_eq!(d.pick(1000), 1);
        assert_eq!(d.pick(256), 7, "one byte for 256 choices");
        assert!(d.is_empty());
        assert_eq!(d.pick(10), 0);
        assert_eq!(d.bits(), 0);
    }

    #[test]
    fn the_extremes_are_reached() {
        let mut rng = SimRng::new(3);
        let v = view();
        let epochs: Vec<Epoch> = (0..2_000).map(|_| epoch(&mut rng, &v)).collect();
        for want in [6, 7, 8, 9, 7 + EPOCH_JUMP, Epoch::MAX, Epoch::MIN, -1] {
            assert!(epochs.contains(&want), "epoch {want} never drawn");
        }
        let offsets: Vec<Offset> = (0..2_000).map(|_| offset(&mut rng, &v)).collect();
        for want in [-2, 39, 40, 41, Offset::MAX, Offset::MIN, 1 << 62] {
            assert!(offsets.contains(&want), "offset {want} never drawn");
        }
        let lists: Vec<Vec<NodeId>> = (0..200).map(|_| successors(&mut rng, &v)).collect();
        assert!(lists.iter().any(Vec::is_empty));
        assert!(lists.iter().any(|l| l.len() > 1_000));
    }

    #[test]
    fn same_draws_same_lie() {
        let v = view();
        let a = format!("{:?}", lie(&mut SimRng::new(9), &v));
        let b = format!("{:?}", lie(&mut SimRng::new(9), &v));
        assert_eq!(a, b);
        let bytes = [3u8, 1, 4, 1, 5, 9, 2, 6];
        let c = format!("{:?}", lie(&mut ByteDraw::new(&bytes), &v));
        let e = format!("{:?}", lie(&mut ByteDraw::new(&bytes), &v));
        assert_eq!(c, e);
    }
}
