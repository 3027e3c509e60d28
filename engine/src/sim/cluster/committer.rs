//! A consumer group's committer (docs/simulation.md, "Committed offsets"): OffsetCommits of
//! increasing offsets for two groups, one in flight per group, sent to the node it believes
//! is the coordinator (another one, drawn, after a refusal or a node that went away). The
//! replicas write each commit through the log and answer it once it commits; the invariant
//! [`Invariant::GroupOffsetKept`]: once a replica has applied the log past the high watermark
//! at which a commit was acknowledged, it holds that offset or a later one, through leader
//! changes, restarts, lost disks, retention and resets.

use std::collections::{BTreeMap, BTreeSet};

use crate::base::Offset;
use crate::groups::{GroupReply, GroupRequest, MemberRef, PartitionOffset};
use crate::raft::{ErrorCode, NodeId, TimeMs};
use crate::replica::Input as ReplicaInput;
use crate::sim::invariants::{answered_once, breach, Checked, Invariant};

use super::clients::CLIENT_TIMEOUT_MS;
use super::scheduler::Event;
use super::Simulation;

/// Request ids of the commits start here, apart from the producers' and the client's.
pub(super) const COMMIT_ID_BASE: u64 = 1 << 60;
/// The groups committed to.
const GROUPS: [&str; 2] = ["g0", "g1"];
const TOPIC: &str = "__cluster_metadata";

/// One commit sent and not answered yet.
struct InFlight {
    group: usize,
    offset: i64,
    node: usize,
    incarnation: u32,
    sent_at: TimeMs,
}

#[derive(Default)]
pub(super) struct Committer {
    next_request: u64,
    next_offset: i64,
    believed_leader: usize,
    in_flight: BTreeMap<u64, InFlight>,
    /// Commits answered already (a second answer breaks the exactly-once contract).
    answered: BTreeSet<u64>,
    /// Per group: the highest offset acknowledged, and the answering leader's high watermark
    /// then (its record lies below it).
    acked: [Option<(i64, Offset)>; GROUPS.len()],
    pub(super) acks: u64,
}

impl Simulation {
    pub(super) fn start_committer(&mut self) {
        if self.cfg.group_commits {
            self.schedule(3, Event::CommitterTick);
        }
    }

    /// One turn: check every running replica against the acknowledged commits, give up on
    /// commits unanswered too long, and send one for each group with none in flight.
    pub(super) fn committer_tick(&mut self) -> Checked {
        let delay = self.rng.range(20, 80);
        self.schedule(delay, Event::CommitterTick);
        self.check_group_offsets()?;
        let now = self.now;
        self.committer
            .in_flight
            .retain(|_, c| now < c.sent_at + CLIENT_TIMEOUT_MS);
        if self.client.paused {
            return Ok(());
        }
        for group in 0..GROUPS.len() {
            if self.committer.in_flight.values().any(|c| c.group == group) {
                continue;
            }
            let request = COMMIT_ID_BASE + self.committer.next_request;
            self.committer.next_request += 1;
            self.committer.next_offset += 1;
            let node = self.committer.believed_leader;
            self.committer.in_flight.insert(
                request,
                InFlight {
                    group,
                    offset: self.committer.next_offset,
                    node,
                    incarnation: self.nodes[node].incarnation,
                    sent_at: now,
                },
            );
            let latency = self.rng.range(1, 3);
            self.schedule(latency, Event::CommitDeliver { request });
        }
        Ok(())
    }

    /// The commit reaches its node, if that node still runs the incarnation it was sent to.
    pub(super) fn commit_deliver(&mut self, request: u64) -> Checked {
        let Some(c) = self.committer.in_flight.get(&request) else {
            return Ok(()); // given up on
        };
        let (node, incarnation) = (c.node, c.incarnation);
        let ask = GroupRequest::Commit {
            who: MemberRef {
                group_id: GROUPS[c.group].to_string(),
                generation: None,
                member_id: None,
                instance_id: None,
            },
            offsets: vec![PartitionOffset {
                topic: TOPIC.to_string(),
                partition: 0,
                offset: Some(c.offset),
                leader_epoch: None,
                metadata: None,
            }],
        };
        if !self.nodes[node].running() || self.nodes[node].incarnation != incarnation {
            self.committer.in_flight.remove(&request);
            self.committer.believed_leader = self.rng.index(self.nodes.len());
            return Ok(());
        }
        self.count_event("commit", node as NodeId, request as i64, 0);
        self.step_node(node, ReplicaInput::Group { request, ask })?;
        self.sweep(node)
    }

    /// Node `i` answered group request `request`.
    pub(super) fn group_answered(&mut self, i: usize, request: u64, reply: GroupReply) -> Checked {
        let id = self.nodes[i].id;
        if request < COMMIT_ID_BASE || !self.cfg.group_commits {
            return breach(
                Invariant::ExactlyOnceContract,
                format!("node {id} answered group request {request}, never made"),
            );
        }
        answered_once(&mut self.committer.answered, id, "offset commit", request)?;
        let Some(c) = self.committer.in_flight.remove(&request) else {
            return Ok(()); // given up on
        };
        if c.node != i {
            return breach(
                Invariant::ExactlyOnceContract,
                format!(
                    "node {id} answered commit {request}, sent to node index {}",
                    c.node
                ),
            );
        }
        match reply {
            GroupReply::Written(ErrorCode::NONE) => {
                let replica = self.nodes[i].replica.as_ref().expect("it answered");
                let Some(hw) = replica.core().high_watermark() else {
                    return breach(
                        Invariant::GroupOffsetKept,
                        format!("node {id} acknowledged commit {request} without a high watermark"),
                    );
                };
                let acked = &mut self.committer.acked[c.group];
                if acked.is_none_or(|(offset, _)| offset < c.offset) {
                    *acked = Some((c.offset, hw));
                }
                self.committer.acks += 1;
            }
            GroupReply::Written(_) => {
                self.committer.believed_leader = self.rng.index(self.nodes.len());
            }
            GroupReply::Membership(answer) => {
                return breach(
                    Invariant::ExactlyOnceContract,
                    format!("node {id} answered commit {request} with {answer:?}"),
                );
            }
        }
        Ok(())
    }

    /// Every running replica that applied the log past an acknowledged commit's high
    /// watermark holds that offset or a later one.
    fn check_group_offsets(&self) -> Checked {
        for node in &self.nodes {
            let Some(replica) = node.replica.as_ref() else {
                continue;
            };
            let offsets = replica.groups().offsets();
            for (group, acked) in GROUPS.iter().zip(&self.committer.acked) {
                let Some((offset, hw)) = *acked else {
                    continue;
                };
                if offsets.committed_to() < hw {
                    continue;
                }
                let held = offsets
                    .group(group)
                    .and_then(|g| g.get(&(TOPIC.to_string(), 0)))
                    .map(|c| c.offset);
                if held.is_none_or(|h| h < offset) {
                    return breach(
                        Invariant::GroupOffsetKept,
                        format!(
                            "node {} applied the offsets below {} and holds {held:?} for group \
                             {group}, whose commit of {offset} was acknowledged at high \
                             watermark {hw}",
                            node.id,
                            offsets.committed_to()
                        ),
                    );
                }
            }
        }
        Ok(())
    }
}
