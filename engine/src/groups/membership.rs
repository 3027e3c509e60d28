//! Group membership on the coordinator (the Raft leader): Kafka's classic rebalance protocol
//! (docs/protocol.md, "Consumer groups"). Members join, the coordinator waits for every known
//! member to rejoin (or the rebalance timeout), picks one protocol all of them support, makes
//! the first member the leader and hands it the members' metadata; the leader's SyncGroup
//! carries every member's assignment, which the others' SyncGroups take. Heartbeats keep a
//! member's session; a member silent for its session timeout is removed and the group
//! rebalances. A static member (group.instance.id) keeps its place across restarts: joining
//! again with its instance id replaces its former member id, which is fenced from then on.
//!
//! Logic only: typed requests in, answers out, time passed in (`now`), no clock, socket or
//! randomness inside (member ids are the client id, a prefix the driver chooses once, and a
//! counter). Membership is not replicated: a new coordinator starts with no groups and members
//! join it again (their old member ids are unknown there); committed offsets are replicated
//! (`super::offsets`).

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::base::TimeMs;
use crate::raft::ErrorCode;

/// The coordinator looks at timeouts at most this often (a session is seconds long).
pub const SCAN_INTERVAL_MS: TimeMs = 100;

/// The longest group id, member id, instance id, client id, protocol type or name taken (a
/// classic STRING's bound).
pub const MAX_NAME_BYTES: usize = i16::MAX as usize;

/// The bounds of the coordinator (docs/configuration.md, "Consumer groups").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupLimits {
    /// `group.coordinator.max.groups`: groups with members at once; a join that would make
    /// one more is answered COORDINATOR_NOT_AVAILABLE.
    pub max_groups: usize,
    /// `group.max.size`: members (and members being admitted) of one group.
    pub max_group_size: usize,
    /// `group.coordinator.max.members`: members of every group together.
    pub max_members: usize,
    /// `group.min.session.timeout.ms` and `group.max.session.timeout.ms`.
    pub min_session_timeout_ms: TimeMs,
    pub max_session_timeout_ms: TimeMs,
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty group
    /// waits for more members.
    pub initial_rebalance_delay_ms: TimeMs,
    /// `offset.metadata.max.bytes`: the metadata string of one committed offset.
    pub max_metadata_bytes: usize,
    /// Bytes of one member's protocol metadata, or of one assignment.
    pub max_member_bytes: usize,
    /// `offsets.retention.minutes`, in ms: how long an idle group's offsets are kept
    /// (`super::expiry`).
    pub offsets_retention_ms: TimeMs,
    /// `offsets.retention.check.interval.ms`: how often the coordinator looks for them.
    pub offsets_retention_check_interval_ms: TimeMs,
}

impl Default for GroupLimits {
    fn default() -> Self {
        Self {
            max_groups: 1_000,
            max_group_size: 1_000,
            max_members: 10_000,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_metadata_bytes: 4_096,
            max_member_bytes: 1 << 20,
            offsets_retention_ms: 7 * 24 * 3_600_000,
            offsets_retention_check_interval_ms: 600_000,
        }
    }
}

/// One protocol (assignor) a member supports, with its metadata for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

/// A JoinGroup, as the coordinator takes it (ids absent are None, never empty strings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroup {
    pub group_id: String,
    pub session_timeout_ms: TimeMs,
    pub rebalance_timeout_ms: TimeMs,
    pub member_id: Option<String>,
    pub instance_id: Option<String>,
    pub protocol_type: String,
    /// In the member's order of preference.
    pub protocols: Vec<Protocol>,
    pub client_id: String,
    pub client_host: String,
    /// JoinGroup v4+: a member without an id is first handed one (MEMBER_ID_REQUIRED) and
    /// joins with it.
    pub require_known_member_id: bool,
}

/// A SyncGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncGroup {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    /// v5+: checked against the group's when present.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's: each member's assignment (others send none).
    pub assignments: Vec<(String, Bytes)>,
}

/// Who a Heartbeat or an OffsetCommit speaks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRef {
    pub group_id: String,
    /// None: an OffsetCommit from outside the group's membership (manual assignment).
    pub generation: Option<i32>,
    pub member_id: Option<String>,
    pub instance_id: Option<String>,
}

/// One member a LeaveGroup removes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaving {
    pub member_id: Option<String>,
    pub instance_id: Option<String>,
}

/// A member as the group leader's JoinGroup answer lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

/// The answer to a JoinGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinAnswer {
    pub error: ErrorCode,
    pub generation: Option<i32>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    /// The member's id (also with MEMBER_ID_REQUIRED: the id to join with).
    pub member_id: Option<String>,
    /// The leader's answer lists every member with its metadata for the chosen protocol.
    pub members: Vec<JoinedMember>,
}

impl JoinAnswer {
    pub fn failed(error: ErrorCode) -> Self {
        assert!(!error.is_none(), "a failed join has an error");
        Self {
            error,
            generation: None,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            member_id: None,
            members: Vec::new(),
        }
    }
}

/// The answer to a SyncGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncAnswer {
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

/// An answer to a held or immediate request of the coordinator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupAnswer {
    Join(JoinAnswer),
    Sync(Result<SyncAnswer, ErrorCode>),
    Heartbeat(ErrorCode),
    /// Per leaving member, its error; or one error for the request.
    Leave(Result<Vec<(Leaving, ErrorCode)>, ErrorCode>),
}

/// Answers as they become due: (request id, answer).
pub type Answers = Vec<(u64, GroupAnswer)>;

/// Where a group is in the rebalance protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    /// No members (only ever briefly: an empty group is dropped).
    Empty,
    /// Waiting for every member to (re)join.
    PreparingRebalance,
    /// Joined: waiting for the leader's assignment.
    CompletingRebalance,
    Stable,
}

impl GroupState {
    /// Kafka's name of the state (ListGroups, DescribeGroups).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

#[derive(Clone, Debug)]
struct Member {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: TimeMs,
    rebalance_timeout_ms: TimeMs,
    protocols: Vec<Protocol>,
    assignment: Bytes,
    /// The JoinGroup held until the join phase ends.
    held_join: Option<u64>,
    /// The SyncGroup held until the leader's assignment arrives.
    held_sync: Option<u64>,
    /// The session ends here unless the member is heard from.
    expires_at: TimeMs,
    /// Order of joining: the first member leads when the leader left.
    joined: u64,
}

impl Member {
    fn supports(&self, name: &str) -> bool {
        self.protocols.iter().any(|p| p.name == name)
    }

    fn same_protocols(&self, protocols: &[Protocol]) -> bool {
        self.protocols == protocols
    }
}

#[derive(Clone, Debug)]
struct Group {
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// instance id -> member id of the static members.
    instances: BTreeMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with when the offer lapses.
    pending: BTreeMap<String, TimeMs>,
    /// PreparingRebalance: when the join phase ends whoever has not rejoined.
    /// CompletingRebalance: when members that sent no SyncGroup are removed.
    deadline: Option<TimeMs>,
    /// The first rebalance of an empty group waits its whole delay for more members.
    initial_delay: bool,
}

impl Group {
    fn new() -> Self {
        Self {
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            instances: BTreeMap::new(),
            pending: BTreeMap::new(),
            deadline: None,
            initial_delay: false,
        }
    }

    fn size(&self) -> usize {
        self.members.len() + self.pending.len()
    }

    /// Whether `protocols` has one that every other member supports too.
    fn protocols_fit(
        &self,
        member_id: Option<&str>,
        protocol_type: &str,
        protocols: &[Protocol],
    ) -> bool {
        let others = || {
            self.members
                .iter()
                .filter(move |(id, _)| Some(id.as_str()) != member_id)
        };
        if others().next().is_none() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols
            .iter()
            .any(|p| others().all(|(_, m)| m.supports(&p.name)))
    }

    /// The protocol of the next generation: among those every member supports, the one most
    /// members list first among them (ties: the earliest in the longest-standing member's list).
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().min_by_key(|m| m.joined)?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| self.members.values().all(|m| m.supports(name)))
            .collect();
        let mut votes = vec![0usize; candidates.len()];
        for member in self.members.values() {
            let choice = member
                .protocols
                .iter()
                .find_map(|p| candidates.iter().position(|c| *c == p.name));
            if let Some(index) = choice {
                votes[index] += 1;
            }
        }
        let best = votes.iter().copied().max()?;
        let index = votes.iter().position(|&v| v == best)?;
        Some(candidates[index].to_string())
    }

    fn rebalance_timeout(&self) -> TimeMs {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    fn all_joined(&self) -> bool {
        self.members.values().all(|m| m.held_join.is_some())
    }

    fn check_invariants(&self) {
        for (instance, member_id) in &self.instances {
            let member = self.members.get(member_id);
            assert!(
                member.is_some_and(|m| m.instance_id.as_deref() == Some(instance)),
                "instance {instance} maps to member {member_id}, which is not its member"
            );
        }
        for (id, member) in &self.members {
            if let Some(instance) = &member.instance_id {
                assert_eq!(
                    self.instances.get(instance),
                    Some(id),
                    "static member unmapped"
                );
            }
            assert!(
                member.held_sync.is_none() || self.state == GroupState::CompletingRebalance,
                "a SyncGroup held outside CompletingRebalance"
            );
            assert!(
                member.held_join.is_none() || self.state == GroupState::PreparingRebalance,
                "a JoinGroup held outside PreparingRebalance"
            );
        }
        if let Some(leader) = &self.leader {
            assert!(
                self.members.contains_key(leader) || self.state == GroupState::PreparingRebalance,
                "the leader {leader} is not a member"
            );
        }
        assert!(self.generation >= 0, "generations are never negative");
    }
}

/// What DescribeGroups tells of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub members: Vec<MemberDescription>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// The groups this coordinator holds, and their members.
#[derive(Debug)]
pub struct Membership {
    limits: GroupLimits,
    /// Member ids are `client id-prefix-counter`: the prefix is the driver's (a node's random
    /// incarnation), so that ids of two coordinators never meet.
    member_id_prefix: String,
    next_member: u64,
    groups: BTreeMap<String, Group>,
    members: usize,
    last_scan: TimeMs,
}

impl Membership {
    pub fn new(limits: GroupLimits, member_id_prefix: String) -> Self {
        Self {
            limits,
            member_id_prefix,
            next_member: 0,
            groups: BTreeMap::new(),
            members: 0,
            last_scan: 0,
        }
    }

    pub fn limits(&self) -> &GroupLimits {
        &self.limits
    }

    /// Groups with members (or being joined).
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Members of every group.
    pub fn member_count(&self) -> usize {
        self.members
    }

    /// The groups and their states, by group id.
    pub fn list(&self) -> impl Iterator<Item = (&str, GroupState, Option<&str>)> {
        self.groups
            .iter()
            .map(|(id, g)| (id.as_str(), g.state, g.protocol_type.as_deref()))
    }

    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        let group = self.groups.get(group_id)?;
        let protocol = group.protocol.as_deref();
        Some(GroupDescription {
            state: group.state,
            protocol_type: group.protocol_type.clone(),
            protocol: group.protocol.clone(),
            members: group
                .members
                .iter()
                .map(|(id, m)| MemberDescription {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: m
                        .protocols
                        .iter()
                        .find(|p| Some(p.name.as_str()) == protocol)
                        .map(|p| p.metadata.clone())
                        .unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        })
    }

    /// Whether the group has members (DeleteGroups refuses those).
    pub fn has_members(&self, group_id: &str) -> bool {
        self.groups.contains_key(group_id)
    }

    fn new_member_id(&mut self, client_id: &str) -> String {
        self.next_member += 1;
        format!("{client_id}-{}-{}", self.member_id_prefix, self.next_member)
    }

    /// A JoinGroup `request` at `now`. Its answer goes to `out`, at once or when the join phase
    /// ends; so may the answers of other members' held requests.
    pub fn join(&mut self, request: u64, join: JoinGroup, now: TimeMs, out: &mut Answers) {
        let answer = self.join_inner(request, join, now, out);
        if let Some(answer) = answer {
            out.push((request, GroupAnswer::Join(answer)));
        }
    }

    fn join_inner(
        &mut self,
        request: u64,
        join: JoinGroup,
        now: TimeMs,
        out: &mut Answers,
    ) -> Option<JoinAnswer> {
        let group_id = join.group_id.clone();
        let limits = &self.limits;
        if join.group_id.is_empty() || join.group_id.len() > MAX_NAME_BYTES {
            return Some(JoinAnswer::failed(ErrorCode::INVALID_GROUP_ID));
        }
        if join.session_timeout_ms < limits.min_session_timeout_ms
            || join.session_timeout_ms > limits.max_session_timeout_ms
        {
            return Some(JoinAnswer::failed(ErrorCode::INVALID_SESSION_TIMEOUT));
        }
        let member_bytes: usize = join.protocols.iter().map(|p| p.metadata.len()).sum();
        if join.protocol_type.is_empty()
            || join.protocols.is_empty()
            || member_bytes > limits.max_member_bytes
        {
            return Some(JoinAnswer::failed(ErrorCode::INCONSISTENT_GROUP_PROTOCOL));
        }
        if !self.groups.contains_key(&join.group_id) {
            if join.member_id.is_some() {
                return Some(JoinAnswer::failed(ErrorCode::UNKNOWN_MEMBER_ID));
            }
            if self.groups.len() >= limits.max_groups {
                return Some(JoinAnswer::failed(ErrorCode::COORDINATOR_NOT_AVAILABLE));
            }
        }
        let max_group_size = limits.max_group_size;
        let full = self.members >= limits.max_members;
        let new_id = match &join.member_id {
            None => Some(self.new_member_id(&join.client_id)),
            Some(_) => None,
        };
        let group = self
            .groups
            .entry(group_id.clone())
            .or_insert_with(Group::new);
        if !group.protocols_fit(
            join.member_id.as_deref(),
            &join.protocol_type,
            &join.protocols,
        ) {
            let answer = JoinAnswer::failed(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
            self.drop_if_empty(&group_id);
            return Some(answer);
        }
        let group = self.groups.get_mut(&group_id).expect("just looked up");
        let member_id = match (join.member_id.clone(), &join.instance_id) {
            // A static member back (a restart): it takes its place under a new id, and the
            // old id is fenced.
            (None, Some(instance)) if group.instances.contains_key(instance) => {
                let new_id = new_id.expect("no member id given");
                let old_id = group.instances[instance].clone();
                let mut member = group
                    .members
                    .remove(&old_id)
                    .expect("instances map members");
                if let Some(held) = member.held_join.take() {
                    out.push((
                        held,
                        GroupAnswer::Join(JoinAnswer::failed(ErrorCode::FENCED_INSTANCE_ID)),
                    ));
                }
                if let Some(held) = member.held_sync.take() {
                    out.push((held, GroupAnswer::Sync(Err(ErrorCode::FENCED_INSTANCE_ID))));
                }
                let unchanged = member.same_protocols(&join.protocols);
                member.protocols = join.protocols;
                member.session_timeout_ms = join.session_timeout_ms;
                member.rebalance_timeout_ms = join.rebalance_timeout_ms;
                member.client_id = join.client_id;
                member.client_host = join.client_host;
                member.expires_at = now.saturating_add(member.session_timeout_ms);
                group.members.insert(new_id.clone(), member);
                group.instances.insert(instance.clone(), new_id.clone());
                if group.leader.as_deref() == Some(old_id.as_str()) {
                    group.leader = Some(new_id.clone());
                }
                if group.state == GroupState::Stable && unchanged {
                    // Nothing changed for the group: the member gets the generation back and
                    // takes its assignment with SyncGroup.
                    return Some(Self::joined_answer(group, &new_id, false));
                }
                new_id
            }
            (None, instance) => {
                let new_id = new_id.expect("no member id given");
                if group.size() >= max_group_size || full {
                    let answer = JoinAnswer::failed(ErrorCode::GROUP_MAX_SIZE_REACHED);
                    self.drop_if_empty(&group_id);
                    return Some(answer);
                }
                if instance.is_none() && join.require_known_member_id {
                    group
                        .pending
                        .insert(new_id.clone(), now.saturating_add(join.session_timeout_ms));
                    return Some(JoinAnswer {
                        member_id: Some(new_id),
                        ..JoinAnswer::failed(ErrorCode::MEMBER_ID_REQUIRED)
                    });
                }
                self.members += 1;
                let group = self.groups.get_mut(&group_id).expect("just looked up");
                Self::add_member(group, &new_id, join, now, &mut self.next_member);
                new_id
            }
            (Some(member_id), instance) => {
                if let Some(instance) = instance {
                    match group.instances.get(instance) {
                        Some(holder) if *holder != member_id => {
                            return Some(JoinAnswer::failed(ErrorCode::FENCED_INSTANCE_ID))
                        }
                        Some(_) => {}
                        None if !group.pending.contains_key(&member_id) => {
                            return Some(JoinAnswer::failed(ErrorCode::UNKNOWN_MEMBER_ID))
                        }
                        None => {}
                    }
                }
                if group.pending.remove(&member_id).is_some() {
                    if full {
                        let answer = JoinAnswer::failed(ErrorCode::GROUP_MAX_SIZE_REACHED);
                        self.drop_if_empty(&group_id);
                        return Some(answer);
                    }
                    self.members += 1;
                    let group = self.groups.get_mut(&group_id).expect("just looked up");
                    Self::add_member(group, &member_id, join, now, &mut self.next_member);
                } else {
                    let Some(member) = group.members.get_mut(&member_id) else {
                        return Some(JoinAnswer::failed(ErrorCode::UNKNOWN_MEMBER_ID));
                    };
                    if join.instance_id.is_some() && member.instance_id != join.instance_id {
                        return Some(JoinAnswer::failed(ErrorCode::FENCED_INSTANCE_ID));
                    }
                    let unchanged = member.same_protocols(&join.protocols);
                    member.protocols = join.protocols;
                    member.session_timeout_ms = join.session_timeout_ms;
                    member.rebalance_timeout_ms = join.rebalance_timeout_ms;
                    member.expires_at = now.saturating_add(member.session_timeout_ms);
                    let is_leader = group.leader.as_deref() == Some(member_id.as_str());
                    match group.state {
                        GroupState::PreparingRebalance => {}
                        // The join answer was lost: the same generation again.
                        GroupState::CompletingRebalance if unchanged => {
                            return Some(Self::joined_answer(group, &member_id, is_leader));
                        }
                        GroupState::Stable if unchanged && !is_leader => {
                            return Some(Self::joined_answer(group, &member_id, false));
                        }
                        GroupState::CompletingRebalance | GroupState::Stable => {}
                        GroupState::Empty => unreachable!("an empty group has no members"),
                    }
                }
                member_id
            }
        };
        let group = self.groups.get_mut(&group_id).expect("just looked up");
        let member = group
            .members
            .get_mut(&member_id)
            .expect("the member joined");
        if let Some(previous) = member.held_join.replace(request) {
            out.push((
                previous,
                GroupAnswer::Join(JoinAnswer::failed(ErrorCode::REBALANCE_IN_PROGRESS)),
            ));
        }
        // The held join's state needs PreparingRebalance: enter it now.
        if group.state != GroupState::PreparingRebalance {
            Self::prepare_rebalance(group, now, self.limits.initial_rebalance_delay_ms, out);
        }
        self.maybe_complete_join(&group_id, now, out);
        None
    }

    fn add_member(
        group: &mut Group,
        member_id: &str,
        join: JoinGroup,
        now: TimeMs,
        counter: &mut u64,
    ) {
        if group.members.is_empty() {
            group.protocol_type = Some(join.protocol_type.clone());
        }
        if let Some(instance) = &join.instance_id {
            group
                .instances
                .insert(instance.clone(), member_id.to_string());
        }
        *counter += 1;
        let member = Member {
            instance_id: join.instance_id,
            client_id: join.client_id,
            client_host: join.client_host,
            session_timeout_ms: join.session_timeout_ms,
            rebalance_timeout_ms: join.rebalance_timeout_ms,
            protocols: join.protocols,
            assignment: Bytes::new(),
            held_join: None,
            held_sync: None,
            expires_at: now.saturating_add(join.session_timeout_ms),
            joined: *counter,
        };
        group.members.insert(member_id.to_string(), member);
    }

    /// The answer of a member of the current generation (the leader's lists the members).
    fn joined_answer(group: &Group, member_id: &str, with_members: bool) -> JoinAnswer {
        let protocol = group.protocol.as_deref();
        let members = match with_members {
            true => group
                .members
                .iter()
                .map(|(id, m)| JoinedMember {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    metadata: m
                        .protocols
                        .iter()
                        .find(|p| Some(p.name.as_str()) == protocol)
                        .map(|p| p.metadata.clone())
                        .expect("every member supports the chosen protocol"),
                })
                .collect(),
            false => Vec::new(),
        };
        JoinAnswer {
            error: ErrorCode::NONE,
            generation: Some(group.generation),
            protocol_type: group.protocol_type.clone(),
            protocol_name: group.protocol.clone(),
            leader: group.leader.clone(),
            member_id: Some(member_id.to_string()),
            members,
        }
    }

    fn prepare_rebalance(group: &mut Group, now: TimeMs, initial_delay: TimeMs, out: &mut Answers) {
        let first = group.state == GroupState::Empty;
        for member in group.members.values_mut() {
            if let Some(held) = member.held_sync.take() {
                out.push((
                    held,
                    GroupAnswer::Sync(Err(ErrorCode::REBALANCE_IN_PROGRESS)),
                ));
            }
        }
        group.state = GroupState::PreparingRebalance;
        group.initial_delay = first && initial_delay > 0;
        let wait = match group.initial_delay {
            true => initial_delay.min(group.rebalance_timeout()),
            false => group.rebalance_timeout(),
        };
        group.deadline = Some(now.saturating_add(wait));
    }

    /// Ends the join phase when every member has rejoined (or, at its deadline, without those
    /// that have not).
    fn maybe_complete_join(&mut self, group_id: &str, now: TimeMs, out: &mut Answers) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if group.state != GroupState::PreparingRebalance {
            return;
        }
        let due = group.deadline.is_some_and(|d| d <= now);
        if !due && (group.initial_delay || !group.all_joined()) {
            return;
        }
        let gone: Vec<String> = group
            .members
            .iter()
            .filter(|(_, m)| m.held_join.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            Self::remove_member(group, id, ErrorCode::UNKNOWN_MEMBER_ID, out);
        }
        self.members -= gone.len();
        group.generation = group.generation.checked_add(1).unwrap_or(1);
        group.initial_delay = false;
        if group.members.is_empty() {
            group.state = GroupState::Empty;
            group.protocol = None;
            group.leader = None;
            group.deadline = None;
            self.drop_if_empty(group_id);
            return;
        }
        group.protocol = group.select_protocol();
        assert!(
            group.protocol.is_some(),
            "members joined with no protocol in common"
        );
        if !group
            .leader
            .as_ref()
            .is_some_and(|l| group.members.contains_key(l))
        {
            group.leader = group
                .members
                .iter()
                .min_by_key(|(_, m)| m.joined)
                .map(|(id, _)| id.clone());
        }
        group.state = GroupState::CompletingRebalance;
        group.deadline = Some(now.saturating_add(group.rebalance_timeout()));
        let leader = group
            .leader
            .clone()
            .expect("a group with members has a leader");
        let held: Vec<(String, u64)> = group
            .members
            .iter_mut()
            .map(|(id, m)| {
                m.expires_at = now.saturating_add(m.session_timeout_ms);
                m.assignment = Bytes::new();
                (
                    id.clone(),
                    m.held_join.take().expect("every member rejoined"),
                )
            })
            .collect();
        for (id, request) in held {
            let answer = Self::joined_answer(group, &id, id == leader);
            out.push((request, GroupAnswer::Join(answer)));
        }
        group.check_invariants();
    }

    /// Removes a member, answering its held requests with `error`.
    fn remove_member(group: &mut Group, member_id: &str, error: ErrorCode, out: &mut Answers) {
        let member = group.members.remove(member_id).expect("removing a member");
        if let Some(instance) = &member.instance_id {
            group.instances.remove(instance);
        }
        if let Some(held) = member.held_join {
            out.push((held, GroupAnswer::Join(JoinAnswer::failed(error))));
        }
        if let Some(held) = member.held_sync {
            out.push((held, GroupAnswer::Sync(Err(error))));
        }
    }

    fn drop_if_empty(&mut self, group_id: &str) {
        if self
            .groups
            .get(group_id)
            .is_some_and(|g| g.members.is_empty() && g.pending.is_empty())
        {
            self.groups.remove(group_id);
        }
    }

    /// Checks a member of a group's current generation: the error a Heartbeat, a SyncGroup or
    /// an OffsetCommit gets, if any.
    fn check_member(&self, who: &MemberRef) -> Result<&Group, ErrorCode> {
        let group = self
            .groups
            .get(&who.group_id)
            .ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        if let Some(instance) = &who.instance_id {
            if let Some(holder) = group.instances.get(instance) {
                if who.member_id.as_ref() != Some(holder) {
                    return Err(ErrorCode::FENCED_INSTANCE_ID);
                }
            }
        }
        let member_id = who.member_id.as_ref().ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        let member = group
            .members
            .get(member_id)
            .ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        if who.instance_id.is_some() && member.instance_id != who.instance_id {
            return Err(ErrorCode::FENCED_INSTANCE_ID);
        }
        if who.generation != Some(group.generation) {
            return Err(ErrorCode::ILLEGAL_GENERATION);
        }
        Ok(group)
    }

    /// A SyncGroup `request` at `now`.
    pub fn sync(&mut self, request: u64, sync: SyncGroup, now: TimeMs, out: &mut Answers) {
        let who = MemberRef {
            group_id: sync.group_id.clone(),
            generation: Some(sync.generation),
            member_id: Some(sync.member_id.clone()),
            instance_id: sync.instance_id.clone(),
        };
        let answer = match self.check_member(&who) {
            Err(error) => Err(error),
            Ok(group)
                if sync
                    .protocol_type
                    .as_ref()
                    .is_some_and(|t| Some(t) != group.protocol_type.as_ref())
                    || sync
                        .protocol_name
                        .as_ref()
                        .is_some_and(|p| Some(p) != group.protocol.as_ref()) =>
            {
                Err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL)
            }
            Ok(group) if group.state == GroupState::PreparingRebalance => {
                Err(ErrorCode::REBALANCE_IN_PROGRESS)
            }
            Ok(group) if group.state == GroupState::Stable => {
                Ok(Self::sync_answer(group, &sync.member_id))
            }
            Ok(_) => {
                let max_member_bytes = self.limits.max_member_bytes;
                let group = self.groups.get_mut(&sync.group_id).expect("checked");
                debug_assert_eq!(group.state, GroupState::CompletingRebalance);
                let member = group.members.get_mut(&sync.member_id).expect("checked");
                member.expires_at = now.saturating_add(member.session_timeout_ms);
                if let Some(previous) = member.held_sync.replace(request) {
                    out.push((
                        previous,
                        GroupAnswer::Sync(Err(ErrorCode::REBALANCE_IN_PROGRESS)),
                    ));
                }
                if group.leader.as_deref() == Some(sync.member_id.as_str()) {
                    for (id, member) in group.members.iter_mut() {
                        member.assignment = sync
                            .assignments
                            .iter()
                            .find(|(to, a)| to == id && a.len() <= max_member_bytes)
                            .map(|(_, a)| a.clone())
                            .unwrap_or_default();
                    }
                    group.state = GroupState::Stable;
                    group.deadline = None;
                    let ids: Vec<String> = group.members.keys().cloned().collect();
                    for id in ids {
                        let member = group.members.get_mut(&id).expect("listed");
                        if let Some(held) = member.held_sync.take() {
                            let answer = Self::sync_answer(group, &id);
                            out.push((held, GroupAnswer::Sync(Ok(answer))));
                        }
                    }
                    group.check_invariants();
                }
                return;
            }
        };
        out.push((request, GroupAnswer::Sync(answer)));
    }

    fn sync_answer(group: &Group, member_id: &str) -> SyncAnswer {
        SyncAnswer {
            protocol_type: group.protocol_type.clone(),
            protocol_name: group.protocol.clone(),
            assignment: group.members[member_id].assignment.clone(),
        }
    }

    /// A Heartbeat at `now`: the member's session goes on; the answer says whether it must
    /// rejoin.
    pub fn heartbeat(&mut self, who: &MemberRef, now: TimeMs) -> ErrorCode {
        // A member waiting in a rebalance is told so whatever its generation (it rejoins).
        let rebalancing = self.groups.get(&who.group_id).is_some_and(|g| {
            g.state == GroupState::PreparingRebalance
                && who
                    .member_id
                    .as_ref()
                    .is_some_and(|id| g.members.contains_key(id))
        });
        let checked = match rebalancing {
            true => {
                let mut unchecked_generation = who.clone();
                unchecked_generation.generation =
                    self.groups.get(&who.group_id).map(|g| g.generation);
                self.check_member(&unchecked_generation).map(|_| ())
            }
            false => self.check_member(who).map(|_| ()),
        };
        if let Err(error) = checked {
            return error;
        }
        let group = self.groups.get_mut(&who.group_id).expect("checked");
        let member = group
            .members
            .get_mut(who.member_id.as_deref().expect("checked"))
            .expect("checked");
        member.expires_at = now.saturating_add(member.session_timeout_ms);
        match group.state {
            GroupState::PreparingRebalance => ErrorCode::REBALANCE_IN_PROGRESS,
            GroupState::CompletingRebalance | GroupState::Stable => ErrorCode::NONE,
            GroupState::Empty => unreachable!("an empty group has no members"),
        }
    }

    /// Whether an OffsetCommit of `who` may commit: a member of the current generation (not
    /// while its assignment is being handed out), or, with no generation and no member id, a
    /// client outside any membership of a group that has no members.
    pub fn check_commit(&self, who: &MemberRef) -> Result<(), ErrorCode> {
        if who.generation.is_none() && who.member_id.is_none() && who.instance_id.is_none() {
            return match self.groups.get(&who.group_id) {
                Some(group) if !group.members.is_empty() => Err(ErrorCode::ILLEGAL_GENERATION),
                _ => Ok(()),
            };
        }
        let group = self.check_member(who)?;
        match group.state {
            GroupState::CompletingRebalance => Err(ErrorCode::REBALANCE_IN_PROGRESS),
            GroupState::PreparingRebalance | GroupState::Stable => Ok(()),
            GroupState::Empty => Err(ErrorCode::UNKNOWN_MEMBER_ID),
        }
    }

    /// A LeaveGroup `request` at `now`: each leaving member's error, or one for all.
    pub fn leave(
        &mut self,
        request: u64,
        group_id: &str,
        leaving: Vec<Leaving>,
        now: TimeMs,
        out: &mut Answers,
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            out.push((
                request,
                GroupAnswer::Leave(Err(ErrorCode::UNKNOWN_MEMBER_ID)),
            ));
            return;
        };
        let mut results = Vec::with_capacity(leaving.len());
        let mut removed = 0;
        for who in leaving {
            let member_id = match (&who.member_id, &who.instance_id) {
                (member_id, Some(instance)) => match group.instances.get(instance) {
                    Some(holder) if member_id.as_ref().is_none_or(|m| m == holder) => {
                        Some(holder.clone())
                    }
                    Some(_) => {
                        results.push((who, ErrorCode::FENCED_INSTANCE_ID));
                        continue;
                    }
                    None => None,
                },
                (Some(member_id), None) => Some(member_id.clone()),
                (None, None) => None,
            };
            let error = match member_id {
                Some(id) if group.members.contains_key(&id) => {
                    Self::remove_member(group, &id, ErrorCode::UNKNOWN_MEMBER_ID, out);
                    removed += 1;
                    ErrorCode::NONE
                }
                Some(id) if group.pending.remove(&id).is_some() => ErrorCode::NONE,
                Some(_) | None => ErrorCode::UNKNOWN_MEMBER_ID,
            };
            results.push((who, error));
        }
        self.members -= removed;
        if removed > 0 {
            self.after_removal(group_id, now, out);
        }
        self.drop_if_empty(group_id);
        out.push((request, GroupAnswer::Leave(Ok(results))));
    }

    /// Members left or were removed: the rest rebalance.
    fn after_removal(&mut self, group_id: &str, now: TimeMs, out: &mut Answers) {
        let initial_delay = self.limits.initial_rebalance_delay_ms;
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if group
            .leader
            .as_ref()
            .is_some_and(|l| !group.members.contains_key(l))
        {
            group.leader = None;
        }
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                Self::prepare_rebalance(group, now, initial_delay, out);
            }
            GroupState::PreparingRebalance | GroupState::Empty => {}
        }
        self.maybe_complete_join(group_id, now, out);
    }

    /// When the coordinator next needs a tick (None: no group).
    pub fn next_deadline(&self) -> Option<TimeMs> {
        (!self.groups.is_empty()).then(|| self.last_scan.saturating_add(SCAN_INTERVAL_MS))
    }

    /// Time passed: sessions and rebalances past their deadlines end (looked at every
    /// [`SCAN_INTERVAL_MS`]).
    pub fn tick(&mut self, now: TimeMs, out: &mut Answers) {
        if now < self.last_scan.saturating_add(SCAN_INTERVAL_MS) {
            return;
        }
        self.last_scan = now;
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for group_id in ids {
            let Some(group) = self.groups.get_mut(&group_id) else {
                continue;
            };
            group.pending.retain(|_, lapses| *lapses > now);
            // A member waiting in a join is kept until the join phase ends.
            let mut expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| m.expires_at <= now && m.held_join.is_none())
                .map(|(id, _)| id.clone())
                .collect();
            if group.state == GroupState::CompletingRebalance
                && group.deadline.is_some_and(|d| d <= now)
            {
                // The leader's assignment never came: those that did not sync go.
                let unsynced: Vec<String> = group
                    .members
                    .iter()
                    .filter(|(id, m)| m.held_sync.is_none() && !expired.contains(id))
                    .map(|(id, _)| id.clone())
                    .collect();
                expired.extend(unsynced);
                if expired.is_empty() {
                    // Every member synced but the leader's SyncGroup is what is missing; the
                    // leader has one held, so this cannot be: the leader's completes the phase.
                    unreachable!("every member of a completing group synced, the leader too");
                }
            }
            for id in &expired {
                Self::remove_member(group, id, ErrorCode::UNKNOWN_MEMBER_ID, out);
            }
            self.members -= expired.len();
            if !expired.is_empty() {
                self.after_removal(&group_id, now, out);
            } else {
                self.maybe_complete_join(&group_id, now, out);
            }
            self.drop_if_empty(&group_id);
        }
    }

    /// This node stopped coordinating (no longer the leader): every held request is answered
    /// NOT_COORDINATOR and the groups are forgotten (their members find the new coordinator
    /// and join it).
    pub fn resign(&mut self, out: &mut Answers) {
        for group in std::mem::take(&mut self.groups).into_values() {
            for member in group.members.into_values() {
                if let Some(held) = member.held_join {
                    out.push((
                        held,
                        GroupAnswer::Join(JoinAnswer::failed(ErrorCode::NOT_COORDINATOR)),
                    ));
                }
                if let Some(held) = member.held_sync {
                    out.push((held, GroupAnswer::Sync(Err(ErrorCode::NOT_COORDINATOR))));
                }
            }
        }
        self.members = 0;
    }

    /// Checks every group's invariants (tests, the simulator).
    pub fn check_invariants(&self) {
        let mut members = 0;
        for group in self.groups.values() {
            group.check_invariants();
            members += group.members.len();
            assert!(
                group.size() <= self.limits.max_group_size,
                "a group over its size"
            );
        }
        assert_eq!(members, self.members, "the member count drifted");
        assert!(
            self.members <= self.limits.max_members,
            "over the member limit"
        );
        assert!(
            self.groups.len() <= self.limits.max_groups,
            "over the group limit"
        );
    }
}
