//! The coordinator's rebalance protocol, step by step, and a random walk that checks its
//! invariants and that every request is answered exactly once.

use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;

use super::membership::{Answers, SCAN_INTERVAL_MS};
use super::*;

const SESSION: TimeMs = 10_000;
const REBALANCE: TimeMs = 30_000;
const DELAY: TimeMs = 3_000;

fn limits() -> GroupLimits {
    GroupLimits {
        max_groups: 4,
        max_group_size: 3,
        max_members: 8,
        initial_rebalance_delay_ms: DELAY,
        ..GroupLimits::default()
    }
}

fn protocols(names: &[&str]) -> Vec<Protocol> {
    names
        .iter()
        .map(|n| Protocol {
            name: n.to_string(),
            metadata: Bytes::from(format!("meta-{n}")),
        })
        .collect()
}

fn join_of(group: &str, member: Option<&str>, instance: Option<&str>, names: &[&str]) -> JoinGroup {
    JoinGroup {
        group_id: group.to_string(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        member_id: member.map(str::to_string),
        instance_id: instance.map(str::to_string),
        protocol_type: "consumer".to_string(),
        protocols: protocols(names),
        client_id: "c".to_string(),
        client_host: "/127.0.0.1".to_string(),
        require_known_member_id: true,
    }
}

/// A coordinator and a request counter, with the answers each step gave.
struct Harness {
    m: Membership,
    next: u64,
    now: TimeMs,
    answered: BTreeMap<u64, GroupAnswer>,
}

impl Harness {
    fn new() -> Self {
        Self {
            m: Membership::new(limits(), "n1".to_string()),
            next: 0,
            now: 1_000,
            answered: BTreeMap::new(),
        }
    }

    fn take(&mut self, out: Answers) {
        for (id, answer) in out {
            assert!(id < self.next, "an answer to a request never made");
            let previous = self.answered.insert(id, answer);
            assert!(previous.is_none(), "request {id} answered twice");
        }
        self.m.check_invariants();
    }

    fn join(&mut self, join: JoinGroup) -> u64 {
        let id = self.next;
        self.next += 1;
        let mut out = Vec::new();
        self.m.join(id, join, self.now, &mut out);
        self.take(out);
        id
    }

    fn sync(
        &mut self,
        group: &str,
        generation: i32,
        member: &str,
        assignments: Vec<(String, Bytes)>,
    ) -> u64 {
        let id = self.next;
        self.next += 1;
        let mut out = Vec::new();
        let sync = SyncGroup {
            group_id: group.to_string(),
            generation,
            member_id: member.to_string(),
            instance_id: None,
            protocol_type: Some("consumer".to_string()),
            protocol_name: None,
            assignments,
        };
        self.m.sync(id, sync, self.now, &mut out);
        self.take(out);
        id
    }

    fn heartbeat(
        &mut self,
        group: &str,
        generation: i32,
        member: &str,
        instance: Option<&str>,
    ) -> ErrorCode {
        let who = MemberRef {
            group_id: group.to_string(),
            generation: Some(generation),
            member_id: Some(member.to_string()),
            instance_id: instance.map(str::to_string),
        };
        let error = self.m.heartbeat(&who, self.now);
        self.m.check_invariants();
        error
    }

    fn leave(&mut self, group: &str, member: &str) -> u64 {
        let id = self.next;
        self.next += 1;
        let mut out = Vec::new();
        let leaving = vec![Leaving {
            member_id: Some(member.to_string()),
            instance_id: None,
        }];
        self.m.leave(id, group, leaving, self.now, &mut out);
        self.take(out);
        id
    }

    fn advance(&mut self, ms: TimeMs) {
        let end = self.now + ms;
        while self.now < end {
            self.now = (self.now + 5 * SCAN_INTERVAL_MS).min(end);
            let mut out = Vec::new();
            self.m.tick(self.now, &mut out);
            self.take(out);
        }
    }

    fn joined(&self, request: u64) -> Option<&JoinAnswer> {
        match self.answered.get(&request)? {
            GroupAnswer::Join(answer) => Some(answer),
            other => panic!("not a join answer: {other:?}"),
        }
    }

    fn synced(&self, request: u64) -> Option<&Result<SyncAnswer, ErrorCode>> {
        match self.answered.get(&request)? {
            GroupAnswer::Sync(answer) => Some(answer),
            other => panic!("not a sync answer: {other:?}"),
        }
    }

    /// A new member's first two joins (MEMBER_ID_REQUIRED, then with its id): its id and the
    /// held request.
    fn new_member(&mut self, group: &str, names: &[&str]) -> (String, u64) {
        let first = self.join(join_of(group, None, None, names));
        let answer = self.joined(first).expect("answered at once").clone();
        assert_eq!(answer.error, ErrorCode::MEMBER_ID_REQUIRED);
        let id = answer.member_id.expect("an id to join with");
        assert!(id.starts_with("c-n1-"), "{id}");
        let second = self.join(join_of(group, Some(&id), None, names));
        (id, second)
    }
}

/// Two members form a group: the first rebalance waits the initial delay, the first member
/// leads and gets both members' metadata, the leader's assignment reaches both.
#[test]
fn two_members_join_sync_and_heartbeat() {
    let mut h = Harness::new();
    let (a, ja) = h.new_member("g", &["range"]);
    let (b, jb) = h.new_member("g", &["range"]);
    assert!(
        h.joined(ja).is_none() && h.joined(jb).is_none(),
        "held for the delay"
    );
    h.advance(DELAY);
    let (la, lb) = (h.joined(ja).unwrap().clone(), h.joined(jb).unwrap().clone());
    assert_eq!((la.error, la.generation), (ErrorCode::NONE, Some(1)));
    assert_eq!(la.leader.as_deref(), Some(a.as_str()));
    assert_eq!(lb.leader.as_deref(), Some(a.as_str()));
    assert_eq!(la.protocol_name.as_deref(), Some("range"));
    assert_eq!(la.members.len(), 2, "the leader sees every member");
    assert!(lb.members.is_empty());
    assert_eq!(la.members[0].metadata, Bytes::from("meta-range"));
    // The follower's sync waits for the leader's.
    let sb = h.sync("g", 1, &b, vec![]);
    assert!(h.synced(sb).is_none());
    assert_eq!(h.heartbeat("g", 1, &b, None), ErrorCode::NONE);
    let sa = h.sync(
        "g",
        1,
        &a,
        vec![(a.clone(), Bytes::from("A")), (b.clone(), Bytes::from("B"))],
    );
    assert_eq!(
        h.synced(sa).unwrap().as_ref().unwrap().assignment,
        Bytes::from("A")
    );
    assert_eq!(
        h.synced(sb).unwrap().as_ref().unwrap().assignment,
        Bytes::from("B")
    );
    assert_eq!(h.heartbeat("g", 1, &a, None), ErrorCode::NONE);
    assert_eq!(h.heartbeat("g", 0, &a, None), ErrorCode::ILLEGAL_GENERATION);
    assert_eq!(
        h.heartbeat("g", 1, "nobody", None),
        ErrorCode::UNKNOWN_MEMBER_ID
    );
    assert_eq!(h.heartbeat("h", 1, &a, None), ErrorCode::UNKNOWN_MEMBER_ID);
    // A sync of the stable generation is answered at once; an old one is refused.
    let again = h.sync("g", 1, &b, vec![]);
    assert_eq!(
        h.synced(again).unwrap().as_ref().unwrap().assignment,
        Bytes::from("B")
    );
    let old = h.sync("g", 0, &b, vec![]);
    assert_eq!(h.synced(old).unwrap(), &Err(ErrorCode::ILLEGAL_GENERATION));
    assert_eq!(h.m.describe("g").unwrap().state, GroupState::Stable);
}

/// Forms a stable group of `n` members: their ids, the generation.
fn stable_group(h: &mut Harness, group: &str, n: usize) -> (Vec<String>, i32) {
    let members: Vec<(String, u64)> = (0..n).map(|_| h.new_member(group, &["range"])).collect();
    h.advance(DELAY);
    let generation = h.joined(members[0].1).unwrap().generation.unwrap();
    let leader = h.joined(members[0].1).unwrap().leader.clone().unwrap();
    let ids: Vec<String> = members.into_iter().map(|(id, _)| id).collect();
    for id in ids.iter().filter(|id| **id != leader) {
        h.sync(group, generation, id, vec![]);
    }
    let plan = ids
        .iter()
        .map(|id| (id.clone(), Bytes::from(id.clone())))
        .collect();
    let s = h.sync(group, generation, &leader, plan);
    assert!(h.synced(s).unwrap().is_ok());
    (ids, generation)
}

/// A new member starts a rebalance: the others learn it from their heartbeats, rejoin, and
/// the join phase ends as soon as all have (no initial delay: the group was not empty).
#[test]
fn a_new_member_makes_the_others_rejoin() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 2);
    let (c, jc) = h.new_member("g", &["range"]);
    assert!(h.joined(jc).is_none());
    assert_eq!(
        h.heartbeat("g", generation, &ids[0], None),
        ErrorCode::REBALANCE_IN_PROGRESS
    );
    // A commit of the old generation still goes through while the group prepares.
    let who = |id: &str, generation| MemberRef {
        group_id: "g".into(),
        generation: Some(generation),
        member_id: Some(id.to_string()),
        instance_id: None,
    };
    assert_eq!(h.m.check_commit(&who(&ids[0], generation)), Ok(()));
    let r0 = h.join(join_of("g", Some(&ids[0]), None, &["range"]));
    assert!(h.joined(r0).is_none());
    let r1 = h.join(join_of("g", Some(&ids[1]), None, &["range"]));
    for r in [r0, r1, jc] {
        let answer = h.joined(r).unwrap();
        assert_eq!(answer.generation, Some(generation + 1), "all three at once");
    }
    assert_eq!(
        h.joined(r0).unwrap().leader.as_deref(),
        Some(ids[0].as_str()),
        "the leader stays"
    );
    assert_eq!(h.joined(r0).unwrap().members.len(), 3);
    // Between the join and the leader's sync, commits wait for the assignment.
    assert_eq!(
        h.m.check_commit(&who(&c, generation + 1)),
        Err(ErrorCode::REBALANCE_IN_PROGRESS)
    );
    assert_eq!(
        h.m.check_commit(&who(&c, generation)),
        Err(ErrorCode::ILLEGAL_GENERATION)
    );
}

/// A member that stops heartbeating is removed after its session timeout, and the rest
/// rebalance without it; a member that does not rejoin in time is left out of the generation.
#[test]
fn a_silent_member_is_removed_and_the_group_rebalances() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 2);
    for _ in 0..(SESSION / 1_000 + 2) {
        h.advance(1_000);
        match h.heartbeat("g", generation, &ids[0], None) {
            ErrorCode::NONE => {}
            ErrorCode::REBALANCE_IN_PROGRESS => break,
            other => panic!("heartbeat answered {other}"),
        }
    }
    let state = h.m.describe("g").unwrap();
    assert_eq!(state.state, GroupState::PreparingRebalance);
    assert_eq!(state.members.len(), 1, "the silent member is gone");
    let r = h.join(join_of("g", Some(&ids[0]), None, &["range"]));
    let answer = h.joined(r).unwrap();
    assert_eq!(answer.generation, Some(generation + 1));
    assert_eq!(answer.members.len(), 1);
    assert_eq!(
        h.heartbeat("g", generation, &ids[1], None),
        ErrorCode::UNKNOWN_MEMBER_ID
    );
}

/// A member that does not rejoin within the rebalance timeout is dropped from the generation
/// and its id is unknown from then on.
#[test]
fn the_rebalance_timeout_drops_who_did_not_rejoin() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 2);
    let r0 = h.join(join_of("g", Some(&ids[0]), None, &["range", "roundrobin"]));
    assert!(h.joined(r0).is_none());
    // ids[1] heartbeats (told to rejoin) but never does.
    for _ in 0..(REBALANCE / 5_000) {
        h.advance(5_000);
        if h.joined(r0).is_some() {
            break;
        }
        assert_eq!(
            h.heartbeat("g", generation, &ids[1], None),
            ErrorCode::REBALANCE_IN_PROGRESS
        );
    }
    let answer = h.joined(r0).expect("the join phase ended at its timeout");
    assert_eq!(answer.generation, Some(generation + 1));
    assert_eq!(answer.members.len(), 1);
    assert_eq!(
        h.heartbeat("g", generation + 1, &ids[1], None),
        ErrorCode::UNKNOWN_MEMBER_ID
    );
}

/// The leader's SyncGroup never comes: after the rebalance timeout those that did not sync go.
#[test]
fn a_leader_that_never_syncs_is_removed() {
    let mut h = Harness::new();
    let (a, ja) = h.new_member("g", &["range"]);
    let (b, _) = h.new_member("g", &["range"]);
    h.advance(DELAY);
    assert_eq!(h.joined(ja).unwrap().leader.as_deref(), Some(a.as_str()));
    let sb = h.sync("g", 1, &b, vec![]);
    for _ in 0..(REBALANCE / 5_000 + 1) {
        h.advance(5_000);
        // Both keep their sessions; only the sync is missing.
        let _ = h.heartbeat("g", 1, &a, None);
        let _ = h.heartbeat("g", 1, &b, None);
    }
    assert!(
        h.synced(sb).is_some(),
        "b's sync answered when the group moved on"
    );
    let state = h.m.describe("g").map(|d| d.members.len());
    assert!(state.is_none_or(|n| n <= 1), "the leader is gone");
}

/// Protocol selection: only protocols every member lists, the one most members prefer.
#[test]
fn the_protocol_is_the_one_members_prefer_among_those_all_support() {
    let mut h = Harness::new();
    let (_, j1) = h.new_member("g", &["range", "roundrobin"]);
    let (_, j2) = h.new_member("g", &["roundrobin", "range"]);
    let (_, j3) = h.new_member("g", &["cooperative-sticky", "roundrobin"]);
    h.advance(DELAY);
    for j in [j1, j2, j3] {
        assert_eq!(
            h.joined(j).unwrap().protocol_name.as_deref(),
            Some("roundrobin")
        );
    }
    // A member with nothing in common is refused; so is another protocol type.
    let r = h.join(join_of("g", None, None, &["sticky"]));
    assert_eq!(
        h.joined(r).unwrap().error,
        ErrorCode::INCONSISTENT_GROUP_PROTOCOL
    );
    let mut other_type = join_of("g", None, None, &["roundrobin"]);
    other_type.protocol_type = "connect".into();
    let r = h.join(other_type);
    assert_eq!(
        h.joined(r).unwrap().error,
        ErrorCode::INCONSISTENT_GROUP_PROTOCOL
    );
}

/// A static member restarting (same instance id, no member id) takes its place under a new
/// id without a rebalance; its old id is fenced.
#[test]
fn a_static_member_returns_without_a_rebalance_and_fences_its_old_id() {
    let mut h = Harness::new();
    let j1 = h.join(join_of("g", None, Some("i1"), &["range"]));
    let j2 = h.join(join_of("g", None, Some("i2"), &["range"]));
    h.advance(DELAY);
    let (a1, a2) = (h.joined(j1).unwrap().clone(), h.joined(j2).unwrap().clone());
    let (m1, m2) = (a1.member_id.unwrap(), a2.member_id.unwrap());
    let leader = a1.leader.unwrap();
    let follower = if leader == m1 { &m2 } else { &m1 };
    h.sync("g", 1, follower, vec![]);
    let plan = vec![
        (m1.clone(), Bytes::from("one")),
        (m2.clone(), Bytes::from("two")),
    ];
    h.sync("g", 1, &leader, plan);
    // i2 restarts.
    let back = h.join(join_of("g", None, Some("i2"), &["range"]));
    let answer = h.joined(back).unwrap().clone();
    assert_eq!(answer.error, ErrorCode::NONE);
    assert_eq!(answer.generation, Some(1), "no rebalance");
    let new_id = answer.member_id.unwrap();
    assert_ne!(new_id, m2);
    assert_eq!(
        h.heartbeat("g", 1, &m2, Some("i2")),
        ErrorCode::FENCED_INSTANCE_ID
    );
    assert_eq!(h.heartbeat("g", 1, &new_id, Some("i2")), ErrorCode::NONE);
    let s = h.sync("g", 1, &new_id, vec![]);
    let s = h.synced(s).unwrap().clone();
    assert_eq!(
        s.unwrap().assignment,
        Bytes::from("two"),
        "its assignment kept"
    );
    assert_eq!(h.m.describe("g").unwrap().state, GroupState::Stable);
    // The old id cannot join either.
    let old = h.join(join_of("g", Some(&m2), Some("i2"), &["range"]));
    assert_eq!(h.joined(old).unwrap().error, ErrorCode::FENCED_INSTANCE_ID);
}

/// Members leave: the rest rebalance; the last one leaving drops the group.
#[test]
fn leaving_rebalances_and_the_last_leave_drops_the_group() {
    let mut h = Harness::new();
    let (ids, generation) = stable_group(&mut h, "g", 2);
    let l = h.leave("g", &ids[1]);
    assert!(
        matches!(h.answered.get(&l), Some(GroupAnswer::Leave(Ok(r))) if r[0].1 == ErrorCode::NONE)
    );
    assert_eq!(
        h.heartbeat("g", generation, &ids[0], None),
        ErrorCode::REBALANCE_IN_PROGRESS
    );
    let r = h.join(join_of("g", Some(&ids[0]), None, &["range"]));
    assert_eq!(h.joined(r).unwrap().generation, Some(generation + 1));
    let l = h.leave("g", &ids[0]);
    assert!(matches!(
        h.answered.get(&l),
        Some(GroupAnswer::Leave(Ok(_)))
    ));
    assert!(h.m.describe("g").is_none());
    assert_eq!(h.m.member_count(), 0);
    let l = h.leave("g", &ids[0]);
    assert_eq!(
        h.answered.get(&l),
        Some(&GroupAnswer::Leave(Err(ErrorCode::UNKNOWN_MEMBER_ID)))
    );
}

/// The bounds: session timeouts, members per group, groups, all members.
#[test]
fn limits_are_enforced() {
    let mut h = Harness::new();
    let mut short = join_of("g", None, None, &["range"]);
    short.session_timeout_ms = 10;
    let r = h.join(short);
    assert_eq!(
        h.joined(r).unwrap().error,
        ErrorCode::INVALID_SESSION_TIMEOUT
    );
    let r = h.join(join_of("", None, None, &["range"]));
    assert_eq!(h.joined(r).unwrap().error, ErrorCode::INVALID_GROUP_ID);
    for _ in 0..3 {
        h.new_member("g", &["range"]);
    }
    let r = h.join(join_of("g", None, None, &["range"]));
    assert_eq!(
        h.joined(r).unwrap().error,
        ErrorCode::GROUP_MAX_SIZE_REACHED
    );
    for group in ["h", "i", "j"] {
        h.new_member(group, &["range"]);
    }
    let r = h.join(join_of("k", None, None, &["range"]));
    assert_eq!(
        h.joined(r).unwrap().error,
        ErrorCode::COORDINATOR_NOT_AVAILABLE
    );
    assert_eq!(h.m.group_count(), 4);
    // MEMBER_ID_REQUIRED ids not used lapse after a session.
    let r = h.join(join_of("h", None, None, &["range"]));
    assert_eq!(h.joined(r).unwrap().error, ErrorCode::MEMBER_ID_REQUIRED);
    h.advance(SESSION + 2 * REBALANCE);
    assert_eq!(h.m.member_count(), 0, "nobody heartbeated");
}

/// Losing the leadership answers every held request NOT_COORDINATOR and forgets the groups.
#[test]
fn resigning_answers_every_held_request() {
    let mut h = Harness::new();
    let (_, j) = h.new_member("g", &["range"]);
    assert!(h.joined(j).is_none());
    let mut out = Vec::new();
    h.m.resign(&mut out);
    h.take(out);
    assert_eq!(h.joined(j).unwrap().error, ErrorCode::NOT_COORDINATOR);
    assert_eq!((h.m.group_count(), h.m.member_count()), (0, 0));
}

/// Offset commits: outside any membership only for a group without members; the record is
/// answered when the high watermark passes it, NOT_COORDINATOR if a truncation cuts it.
#[test]
fn commits_are_answered_when_committed() {
    let mut groups = Groups::new(limits(), "n1".into());
    let mut out = Vec::new();
    let commit = |offset| GroupRequest::Commit {
        who: MemberRef {
            group_id: "g".into(),
            generation: None,
            member_id: None,
            instance_id: None,
        },
        offsets: vec![PartitionOffset {
            topic: "__cluster_metadata".into(),
            partition: 0,
            offset: Some(offset),
            leader_epoch: None,
            metadata: Some("x".repeat(10)),
        }],
    };
    let Some(Decision::Append(record)) = groups.decide(1, commit(7), 0, 55, &mut out) else {
        panic!("a commit outside membership of an empty group is written");
    };
    assert_eq!(
        (record.commit_timestamp_ms, record.delete_group),
        (55, false)
    );
    let batch = crate::raft::Batch::from_stored(record.to_batch(20, 1, 55).freeze()).unwrap();
    let op = |kind| LogOp { seq: 1, kind };
    groups.track(
        &op(LogOpKind::Append(vec![batch.clone()])),
        Some(10),
        &mut out,
    );
    groups.appended(1, 20);
    groups.committed(20, &mut out);
    assert!(out.is_empty(), "not past the record yet");
    groups.committed(21, &mut out);
    assert_eq!(out, vec![(1, GroupReply::Written(ErrorCode::NONE))]);
    assert_eq!(
        groups
            .offsets()
            .group("g")
            .unwrap()
            .values()
            .next()
            .unwrap()
            .offset,
        7
    );
    out.clear();
    // A second one, cut by a truncation.
    let Some(Decision::Append(record)) = groups.decide(2, commit(9), 0, 56, &mut out) else {
        panic!();
    };
    let batch = crate::raft::Batch::from_stored(record.to_batch(30, 1, 56).freeze()).unwrap();
    groups.track(&op(LogOpKind::Append(vec![batch])), Some(21), &mut out);
    groups.appended(2, 30);
    groups.track(&op(LogOpKind::TruncateTo(25)), Some(21), &mut out);
    assert_eq!(
        out,
        vec![(2, GroupReply::Written(ErrorCode::NOT_COORDINATOR))]
    );
    groups.committed(40, &mut out);
    assert_eq!(
        groups
            .offsets()
            .group("g")
            .unwrap()
            .values()
            .next()
            .unwrap()
            .offset,
        7
    );
    // Too much metadata; a delete of a group with members; a group with no offsets.
    let mut big = commit(1);
    if let GroupRequest::Commit { offsets, .. } = &mut big {
        offsets[0].metadata = Some("m".repeat(5_000));
    }
    assert_eq!(
        groups.decide(3, big, 0, 0, &mut out),
        Some(Decision::Answer(GroupReply::Written(
            ErrorCode::OFFSET_METADATA_TOO_LARGE
        )))
    );
    assert_eq!(
        groups.decide(
            4,
            GroupRequest::Delete {
                group_id: "none".into()
            },
            0,
            0,
            &mut out
        ),
        Some(Decision::Answer(GroupReply::Written(
            ErrorCode::GROUP_ID_NOT_FOUND
        )))
    );
    let Some(Decision::Append(delete)) = groups.decide(
        5,
        GroupRequest::Delete {
            group_id: "g".into(),
        },
        0,
        0,
        &mut out,
    ) else {
        panic!("an empty group with offsets is deleted through the log");
    };
    assert!(delete.delete_group && delete.offsets.is_empty());
    // OffsetDelete of a partition with no offset writes nothing; of one with, a tombstone.
    let none = GroupRequest::DeleteOffsets {
        group_id: "g".into(),
        partitions: vec![("other".into(), 3)],
    };
    assert_eq!(
        groups.decide(6, none, 0, 0, &mut out),
        Some(Decision::Answer(GroupReply::Written(ErrorCode::NONE)))
    );
    let one = GroupRequest::DeleteOffsets {
        group_id: "g".into(),
        partitions: vec![("__cluster_metadata".into(), 0)],
    };
    let Some(Decision::Append(tombstone)) = groups.decide(7, one, 0, 0, &mut out) else {
        panic!("a committed partition's offset is deleted through the log");
    };
    assert!(!tombstone.delete_group);
    assert_eq!(tombstone.offsets[0].offset, None);
}

/// One step of the random walk.
#[derive(Clone, Debug)]
enum Step {
    Join {
        group: u8,
        member: u8,
        fresh: bool,
        instance: bool,
        protocol: u8,
    },
    Sync {
        group: u8,
        member: u8,
        stale: bool,
    },
    Heartbeat {
        group: u8,
        member: u8,
    },
    Leave {
        group: u8,
        member: u8,
    },
    Advance {
        ms: u16,
    },
    Resign,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..3u8, 0..6u8, any::<bool>(), any::<bool>(), 0..3u8).prop_map(
            |(group, member, fresh, instance, protocol)| Step::Join {
                group,
                member,
                fresh,
                instance,
                protocol
            }
        ),
        (0..3u8, 0..6u8, any::<bool>()).prop_map(|(group, member, stale)| Step::Sync {
            group,
            member,
            stale
        }),
        (0..3u8, 0..6u8).prop_map(|(group, member)| Step::Heartbeat { group, member }),
        (0..3u8, 0..6u8).prop_map(|(group, member)| Step::Leave { group, member }),
        (0..20_000u16).prop_map(|ms| Step::Advance { ms }),
        Just(Step::Resign),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any sequence of requests and time: the invariants hold after every step, no request is
    /// answered twice, and once time runs past every timeout every held request has an answer.
    #[test]
    fn random_walks_keep_the_invariants_and_answer_everything(steps in proptest::collection::vec(step(), 1..120)) {
        let mut h = Harness::new();
        // The member ids each (group, member) slot last got.
        let mut ids: BTreeMap<(u8, u8), String> = BTreeMap::new();
        let mut generations: BTreeMap<u8, i32> = BTreeMap::new();
        let names = [&["range"][..], &["range", "roundrobin"][..], &["roundrobin"][..]];
        for step in steps {
            match step {
                Step::Join { group, member, fresh, instance, protocol } => {
                    let g = format!("g{group}");
                    let known = if fresh { None } else { ids.get(&(group, member)).cloned() };
                    let inst = instance.then(|| format!("i{member}"));
                    let r = h.join(join_of(&g, known.as_deref(), inst.as_deref(), names[protocol as usize]));
                    if let Some(a) = h.joined(r) {
                        if let Some(id) = &a.member_id {
                            ids.insert((group, member), id.clone());
                        }
                        if let Some(generation) = a.generation {
                            generations.insert(group, generation);
                        }
                    }
                }
                Step::Sync { group, member, stale } => {
                    if let Some(id) = ids.get(&(group, member)).cloned() {
                        let generation = generations.get(&group).copied().unwrap_or(0) - i32::from(stale);
                        let plan = ids.values().map(|m| (m.clone(), Bytes::from("p"))).collect();
                        h.sync(&format!("g{group}"), generation, &id, plan);
                    }
                }
                Step::Heartbeat { group, member } => {
                    if let Some(id) = ids.get(&(group, member)).cloned() {
                        let generation = generations.get(&group).copied().unwrap_or(0);
                        h.heartbeat(&format!("g{group}"), generation, &id, None);
                    }
                }
                Step::Leave { group, member } => {
                    if let Some(id) = ids.get(&(group, member)).cloned() {
                        h.leave(&format!("g{group}"), &id);
                    }
                }
                Step::Advance { ms } => h.advance(TimeMs::from(ms)),
                Step::Resign => {
                    let mut out = Vec::new();
                    h.m.resign(&mut out);
                    h.take(out);
                }
            }
        }
        // Silence: every session and rebalance ends.
        h.advance(3 * REBALANCE + SESSION);
        prop_assert_eq!(h.answered.len() as u64, h.next, "a request left without an answer");
        prop_assert_eq!(h.m.member_count(), 0);
    }
}

/// Idle groups' offsets expire through the log (docs/storage.md, "Committed offsets"): only
/// on the coordinator, only once the commit and the group's last member (or the coordinator's
/// start) are both a retention time ago, never while the group has members or a commit in
/// flight; a group whose every offset expires is deleted whole.
#[test]
fn idle_groups_offsets_expire_once_retention_has_passed_since_commit_and_last_member() {
    const RETENTION: TimeMs = 1_000;
    let mut groups = Groups::new(
        GroupLimits {
            offsets_retention_ms: RETENTION,
            offsets_retention_check_interval_ms: 100,
            ..limits()
        },
        "n1".into(),
    );
    let offset = |topic: &str, offset| PartitionOffset {
        topic: topic.into(),
        partition: 0,
        offset: Some(offset),
        leader_epoch: None,
        metadata: None,
    };
    let commit = |group: &str, timestamp_ms, offsets| GroupOffsetsRecord {
        group_id: group.into(),
        commit_timestamp_ms: timestamp_ms,
        delete_group: false,
        offsets,
    };
    groups
        .offsets
        .apply(commit("idle", 0, vec![offset("a", 1)]));
    groups
        .offsets
        .apply(commit("mixed", 0, vec![offset("old", 2)]));
    groups
        .offsets
        .apply(commit("mixed", 1_500, vec![offset("new", 3)]));
    groups
        .offsets
        .apply(commit("busy", 0, vec![offset("a", 4)]));
    groups
        .offsets
        .apply(commit("pending", 0, vec![offset("a", 5)]));
    // A commit of "pending" appended and not committed yet.
    let record = commit("pending", 2_500, vec![offset("a", 6)]);
    let batch = crate::raft::Batch::from_stored(record.to_batch(50, 1, 0).freeze()).unwrap();
    let mut out = Vec::new();
    groups.track(
        &LogOp {
            seq: 1,
            kind: LogOpKind::Append(vec![batch]),
        },
        Some(50),
        &mut out,
    );
    assert!(groups.expire(5_000, 10_000).is_empty(), "not coordinating");
    assert_eq!(groups.next_deadline(), None);
    groups.led(0);
    assert_eq!(groups.next_deadline(), Some(100));
    // "busy" gets a static member at 50.
    let join = join_of("busy", None, Some("i1"), &["range"]);
    groups.decide(1, GroupRequest::Join(join), 50, 0, &mut out);
    assert!(groups.membership().has_members("busy"));
    assert!(groups.expire(99, 2_000).is_empty(), "not due");
    assert!(
        groups.expire(100, 2_000).is_empty(),
        "a retention since the coordinator began has not passed"
    );
    let records = groups.expire(1_000, 2_000);
    let by_group: BTreeMap<&str, &GroupOffsetsRecord> =
        records.iter().map(|r| (r.group_id.as_str(), r)).collect();
    assert_eq!(
        by_group.keys().copied().collect::<Vec<_>>(),
        ["idle", "mixed"],
        "busy has a member, pending a commit in flight"
    );
    assert!(by_group["idle"].delete_group && by_group["idle"].offsets.is_empty());
    let mixed = by_group["mixed"];
    assert!(!mixed.delete_group);
    assert_eq!(mixed.offsets.len(), 1);
    assert_eq!(
        (mixed.offsets[0].topic.as_str(), mixed.offsets[0].offset),
        ("old", None),
        "only the offset committed a retention ago"
    );
    assert_eq!(mixed.commit_timestamp_ms, 2_000);
    // The last member of "busy" leaves at 1,200: its offsets expire a retention later.
    let leave = GroupRequest::Leave {
        group_id: "busy".into(),
        members: vec![Leaving {
            member_id: None,
            instance_id: Some("i1".into()),
        }],
    };
    groups.decide(2, leave, 1_200, 0, &mut out);
    assert!(!groups.membership().has_members("busy"));
    for (record, hw) in records.iter().zip(60..) {
        groups.offsets.apply(record.clone());
        groups.offsets.on_committed(hw);
    }
    let early = groups.expire(2_100, 2_400);
    assert!(early.is_empty(), "busy until 1,200: {early:?}");
    let records = groups.expire(2_200, 2_400);
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].group_id.as_str(), records[0].delete_group),
        ("busy", true)
    );
    // A coordinator that resigned expires nothing.
    groups.resigned(&mut out);
    assert_eq!(groups.next_deadline(), None);
    assert!(groups.expire(100_000, 100_000).is_empty());
}
