//! A tiny deterministic cluster of `RaftCore`s (in-memory network and logs, every op durable one
//! round after it is emitted): elections, replication, commit, leader failure and rejoin.
//! The full fault-injecting simulator lives in engine::sim; this only checks the happy paths
//! end to end through the public API.

use std::collections::{BTreeMap, VecDeque};

use engine::base::EpochCache;
use engine::raft::*;
use engine::record::RecordBatchBuilder;

enum Msg {
    Req {
        from: NodeId,
        to: NodeId,
        correlation: Correlation,
        request: Request,
    },
    Resp {
        from: NodeId,
        to: NodeId,
        correlation: Correlation,
        response: Response,
    },
}

struct Node {
    id: NodeId,
    core: Option<RaftCore>,
    log: Vec<Batch>,
    stored: Option<ElectionState>,
    local: Vec<Input>,
    inbound: BTreeMap<RequestId, (NodeId, Correlation)>,
    committed: BTreeMap<u64, AppendResult>,
}

struct Cluster {
    nodes: Vec<Node>,
    net: VecDeque<Msg>,
    now: TimeMs,
    next_request: RequestId,
    voters: Vec<NodeId>,
}

fn snapshot(log: &[Batch]) -> LogSnapshot {
    let mut epochs = EpochCache::new();
    for b in log {
        epochs.assign(b.epoch, b.base_offset).unwrap();
    }
    LogSnapshot {
        start_offset: 0,
        end_offset: log.last().map_or(0, |b| b.end_offset()),
        epochs: epochs.entries().to_vec(),
        voter_records: engine::record::voters::voter_records(log).unwrap(),
    }
}

impl Cluster {
    fn new(voters: &[NodeId]) -> Self {
        let mut c = Cluster {
            nodes: Vec::new(),
            net: VecDeque::new(),
            now: 0,
            next_request: 1,
            voters: voters.to_vec(),
        };
        for id in voters {
            c.nodes.push(Node {
                id: *id,
                core: None,
                log: Vec::new(),
                stored: None,
                local: Vec::new(),
                inbound: BTreeMap::new(),
                committed: BTreeMap::new(),
            });
            c.start(*id);
        }
        c
    }

    fn node(&mut self, id: NodeId) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.id == id).expect("node")
    }

    fn start(&mut self, id: NodeId) {
        let voters = self.voters.clone();
        let now = self.now;
        let n = self.node(id);
        let mut config = RaftConfig::new(id, "cluster", voters);
        config.seed = 7;
        let core = RaftCore::new(config, n.stored.clone(), snapshot(&n.log), now).expect("start");
        n.core = Some(core);
        n.local.clear();
        n.inbound.clear();
    }

    fn kill(&mut self, id: NodeId) {
        self.node(id).core = None;
    }

    fn feed(&mut self, id: NodeId, input: Input) {
        let mut out = Vec::new();
        {
            let n = self.node(id);
            let Some(core) = n.core.as_mut() else {
                return;
            };
            core.step(input, &mut out);
        }
        for o in out {
            self.carry_out(id, o);
        }
    }

    fn carry_out(&mut self, id: NodeId, o: Output) {
        match o {
            Output::PersistElectionState(s) => self.node(id).stored = Some(s),
            Output::Send {
                to,
                correlation,
                request,
            } => self.net.push_back(Msg::Req {
                from: id,
                to,
                correlation,
                request,
            }),
            Output::Respond { id: rid, response } => {
                if let Some((to, correlation)) = self.node(id).inbound.remove(&rid) {
                    self.net.push_back(Msg::Resp {
                        from: id,
                        to,
                        correlation,
                        response,
                    });
                }
            }
            Output::Log(op) => {
                let n = self.node(id);
                match op.kind {
                    LogOpKind::Append(batches) => {
                        for b in batches {
                            assert_eq!(b.base_offset, n.log.last().map_or(0, |l| l.end_offset()));
                            n.log.push(b);
                        }
                    }
                    LogOpKind::TruncateTo(offset) => n.log.retain(|b| b.end_offset() <= offset),
                    // This harness runs no retention, so no log start for a follower to fall
                    // behind.
                    LogOpKind::ResetTo { start, .. } => panic!("node {id}: a reset to {start}"),
                }
                n.local.push(Input::LogDurable { up_to_seq: op.seq });
            }
            Output::ReadLog {
                read_id,
                from_offset,
                ..
            } => {
                let n = self.node(id);
                let batches: Vec<Batch> = n
                    .log
                    .iter()
                    .filter(|b| b.end_offset() > from_offset)
                    .take(8)
                    .cloned()
                    .collect();
                n.local.push(Input::LogReadDone { read_id, batches });
            }
            Output::AppendDone { id: aid, result } => {
                self.node(id).committed.insert(aid, result);
            }
            Output::Fatal(msg) => panic!("fatal on node {id}: {msg}"),
            Output::Refused { reason, .. } => {
                panic!("node {id} refused an honest message: {reason}")
            }
            Output::HighWatermark(_)
            | Output::RoleChanged { .. }
            | Output::ShutdownComplete
            | Output::Alert(_)
            | Output::EndpointChanged(_)
            | Output::ProbeEndpoint { .. } => {}
            Output::ClientFetchDone { id: fid, .. } => {
                panic!("node {id} answered consumer fetch {fid} nobody sent")
            }
        }
    }

    /// One round: deliver everything in flight, local completions, then a tick per node.
    fn round(&mut self) {
        self.now += 1;
        let msgs: Vec<Msg> = self.net.drain(..).collect();
        for m in msgs {
            match m {
                Msg::Req {
                    from,
                    to,
                    correlation,
                    request,
                } => {
                    let rid = self.next_request;
                    self.next_request += 1;
                    if self.node(to).core.is_none() {
                        continue;
                    }
                    self.node(to).inbound.insert(rid, (from, correlation));
                    self.feed(
                        to,
                        Input::Request {
                            id: rid,
                            from: Sender::Replica(from),
                            request,
                        },
                    );
                }
                Msg::Resp {
                    from,
                    to,
                    correlation,
                    response,
                } => self.feed(
                    to,
                    Input::Response {
                        from,
                        correlation,
                        response,
                    },
                ),
            }
        }
        let ids: Vec<NodeId> = self.nodes.iter().map(|n| n.id).collect();
        for id in ids {
            let local = std::mem::take(&mut self.node(id).local);
            for input in local {
                self.feed(id, input);
            }
            let now = self.now;
            self.feed(id, Input::Tick { now });
        }
    }

    fn leader(&self) -> Option<NodeId> {
        self.nodes
            .iter()
            .filter_map(|n| n.core.as_ref())
            .filter(|c| c.role() == Role::Leader)
            .max_by_key(|c| c.epoch())
            .map(|c| c.node_id())
    }

    fn run_until(&mut self, limit: u64, mut done: impl FnMut(&Cluster) -> bool) {
        for _ in 0..limit {
            if done(self) {
                return;
            }
            self.round();
        }
        panic!("condition not reached within {limit} rounds");
    }

    fn append(&mut self, id: u64, records: u32) {
        let leader = self.leader().expect("a leader");
        let mut b = RecordBatchBuilder::new(0, 0);
        for i in 0..records {
            b.append(0, None, Some(format!("{id}-{i}").as_bytes()), &[]);
        }
        self.feed(
            leader,
            Input::ClientAppend {
                id,
                batch: b.build(),
                record_count: records,
                acks: Acks::Quorum,
            },
        );
    }

    fn committed_everywhere(&self, ids: &[u64]) -> bool {
        ids.iter().all(|id| {
            self.nodes
                .iter()
                .any(|n| matches!(n.committed.get(id), Some(AppendResult::Appended { .. })))
        })
    }
}

fn same_prefix(a: &[Batch], b: &[Batch], up_to: Offset) {
    let pa: Vec<_> = a.iter().filter(|x| x.end_offset() <= up_to).collect();
    let pb: Vec<_> = b.iter().filter(|x| x.end_offset() <= up_to).collect();
    assert_eq!(pa, pb, "committed prefixes differ");
}

#[test]
fn three_voters_elect_replicate_and_survive_leader_failure() {
    let mut c = Cluster::new(&[1, 2, 3]);
    c.run_until(5_000, |c| {
        c.leader().is_some_and(|l| {
            c.nodes
                .iter()
                .find(|n| n.id == l)
                .unwrap()
                .core
                .as_ref()
                .unwrap()
                .high_watermark()
                .is_some()
        })
    });
    let first = c.leader().unwrap();
    let ids: Vec<u64> = (1..=50).collect();
    for id in &ids {
        c.append(*id, 3);
        c.round();
    }
    c.run_until(2_000, |c| c.committed_everywhere(&ids));
    let hw = c
        .node(first)
        .core
        .as_ref()
        .unwrap()
        .high_watermark()
        .unwrap();
    assert!(
        hw >= 151,
        "50 batches of 3 plus the LeaderChange record: {hw}"
    );
    // Followers learn the HW and hold the same committed prefix.
    c.run_until(2_000, |c| {
        c.nodes
            .iter()
            .all(|n| n.core.as_ref().unwrap().high_watermark() == Some(hw))
    });
    let logs: Vec<Vec<Batch>> = c.nodes.iter().map(|n| n.log.clone()).collect();
    same_prefix(&logs[0], &logs[1], hw);
    same_prefix(&logs[0], &logs[2], hw);

    // The leader dies: another one takes over in a higher epoch and keeps committing.
    let first_epoch = c.node(first).core.as_ref().unwrap().epoch();
    c.kill(first);
    // ... and answers clients once its high watermark is known in its epoch and its lease
    // runs (docs/consistency.md): an append before then is refused.
    c.run_until(20_000, |c| {
        c.leader().is_some_and(|l| {
            l != first
                && c.nodes
                    .iter()
                    .find(|n| n.id == l)
                    .and_then(|n| n.core.as_ref())
                    .is_some_and(|core| core.leads_for_clients())
        })
    });
    let second = c.leader().unwrap();
    assert!(c.node(second).core.as_ref().unwrap().epoch() > first_epoch);
    let more: Vec<u64> = (51..=60).collect();
    for id in &more {
        c.append(*id, 1);
    }
    c.run_until(10_000, |c| c.committed_everywhere(&more));

    // The old leader restarts (Resigned in its epoch), rejoins and catches up.
    c.start(first);
    let end = c.node(second).log.last().unwrap().end_offset();
    c.run_until(20_000, |c| {
        let n = c.nodes.iter().find(|n| n.id == first).unwrap();
        n.core.as_ref().unwrap().role() == Role::Follower
            && n.log.last().is_some_and(|b| b.end_offset() >= end)
    });
    let new_hw = c
        .node(second)
        .core
        .as_ref()
        .unwrap()
        .high_watermark()
        .unwrap();
    let leader_log = c.node(second).log.clone();
    let old_log = c.node(first).log.clone();
    same_prefix(&leader_log, &old_log, new_hw);
}

#[test]
fn graceful_leader_shutdown_hands_over_quickly() {
    let mut c = Cluster::new(&[1, 2, 3]);
    c.run_until(5_000, |c| c.leader().is_some());
    let first = c.leader().unwrap();
    let epoch = c.node(first).core.as_ref().unwrap().epoch();
    c.feed(first, Input::Shutdown);
    // EndQuorumEpoch makes the most caught-up voter campaign at once: well under the 2 s
    // fetch timeout.
    c.run_until(1_500, |c| c.leader().is_some_and(|l| l != first));
    let second = c.leader().unwrap();
    assert!(c.node(second).core.as_ref().unwrap().epoch() > epoch);
}
