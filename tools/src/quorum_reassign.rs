//! `ringraft quorum reassign`: change the voter set through AlterQuorum, one command for the
//! whole change (docs/operations.md, "Changing the voters").
//!
//! The leader takes the target and moves toward it one member per committed step; AlterQuorum
//! is answered once the target itself is recorded and committed. So the command returns when
//! the cluster has taken the change on (a leader change after that point resumes it from the
//! log), and `--wait` goes on to poll DescribeQuorum until the voters are the target. The
//! request is an idempotent overwrite: a timeout or a leader change is retried with the same
//! target until the deadline.

use std::time::{Duration, Instant};

use engine::base::ids::DirectoryId;
use engine::raft::{
    AlterQuorumRequest, AlterQuorumResponse, AlterQuorumVoter, DescribeQuorumResponse, ErrorCode,
    NodeId,
};

use crate::admin::{client_error, refused, Admin, AdminError, Leader, Retryable};
use crate::Failure;

/// How long one AlterQuorum may wait at the leader before it answers REQUEST_TIMED_OUT and is
/// sent again (bounded by the command's deadline).
const ALTER_ROUND: Duration = Duration::from_secs(5);
/// How long UNKNOWN_VOTER_ID is retried: longer than a fetch timeout (2 s by default), after
/// which an observer of an old leader has found the new one.
const UNKNOWN_VOTER_GRACE: Duration = Duration::from_secs(5);
/// How often `--wait` asks the leader how far the change has come.
const POLL: Duration = Duration::from_millis(200);

/// What `reassign` was asked to do.
pub enum Reassign {
    /// Make `voters` the voter set.
    To {
        voters: Vec<NodeId>,
        force: bool,
        dry_run: bool,
        wait: bool,
    },
    /// Stop a reassignment in progress where it stands: the target becomes the voters now.
    Cancel { wait: bool },
    /// Say whether a reassignment is in progress (Err when it is).
    Verify,
}

/// `--voters 1,2,4`: a non-empty list of distinct node ids, sorted.
pub fn parse_voters(text: &str) -> Result<Vec<NodeId>, String> {
    let mut voters = Vec::new();
    for part in text.split(',').map(str::trim) {
        let id: NodeId = part
            .parse()
            .map_err(|_| format!("--voters: {part:?} is not a node id"))?;
        if id < 0 {
            return Err(format!("--voters: {id} is not a node id"));
        }
        voters.push(id);
    }
    voters.sort_unstable();
    let count = voters.len();
    voters.dedup();
    if voters.len() != count {
        return Err(format!("--voters {text:?} names a node twice"));
    }
    Ok(voters)
}

pub fn run(admin: &Admin, what: Reassign) -> Result<(), Failure> {
    let deadline = admin.deadline();
    match what {
        Reassign::Verify => verify(admin, deadline),
        Reassign::Cancel { wait } => {
            let quorum = describe(admin, deadline)?;
            let Some(target) = &quorum.target_voters else {
                outln!(
                    "No reassignment in progress; CurrentVoters: {}",
                    list(&voter_ids(&quorum))
                )?;
                return Ok(());
            };
            let voters = voter_ids(&quorum);
            outln!(
                "Cancelling the reassignment to {}: the target becomes the voters now, {}",
                list(&replica_ids(target)),
                list(&voters)
            )?;
            change(admin, deadline, &voters, false, false, wait)
        }
        Reassign::To {
            voters,
            force,
            dry_run,
            wait,
        } => change(admin, deadline, &voters, force, dry_run, wait),
    }
}

fn change(
    admin: &Admin,
    deadline: Instant,
    voters: &[NodeId],
    force: bool,
    dry_run: bool,
    wait: bool,
) -> Result<(), Failure> {
    let (answer, quorum) = alter(admin, deadline, voters, force, dry_run)?;
    for id in lost_voters(&quorum) {
        outln!(
            "Voter {id} fetches from a new log directory (it lost its disk?): it does not vote or \
             count. Take it out (a target without {id}), then add it back (docs/operations.md, \
             \"Replacing a voter that lost its disk\")."
        )?;
    }
    let leader = format!(
        "leader {} (epoch {})",
        answer.leader_id, answer.leader_epoch
    );
    if dry_run {
        outln!(
            "Dry run: {leader} accepts TargetVoters {}; CurrentVoters are {}. Nothing changed.",
            list(voters),
            list(&voter_ids(&quorum))
        )?;
        return Ok(());
    }
    outln!(
        "{leader} recorded and committed TargetVoters {}; it adds and removes one voter at a time.",
        list(voters)
    )?;
    if !wait {
        outln!("`ringraft quorum reassign --verify` tells when the voters are the target.")?;
        return Ok(());
    }
    wait_for(admin, deadline, voters)
}

/// AlterQuorum at the leader until it answers anything but REQUEST_TIMED_OUT, or the deadline.
/// Returns the answer and the leader's DescribeQuorum from the same round.
fn alter(
    admin: &Admin,
    deadline: Instant,
    voters: &[NodeId],
    force: bool,
    validate_only: bool,
) -> Result<(AlterQuorumResponse, DescribeQuorumResponse), Failure> {
    let attempt = |leader: &mut Leader| -> Result<_, Retryable> {
        let left = deadline.saturating_duration_since(Instant::now());
        let request = AlterQuorumRequest {
            cluster_id: leader.cluster_id.clone(),
            target_voters: voters
                .iter()
                .map(|&voter_id| AlterQuorumVoter {
                    voter_id,
                    directory_id: known_directory(&leader.quorum, voter_id),
                })
                .collect(),
            timeout_ms: i32::try_from(left.min(ALTER_ROUND).as_millis()).unwrap_or(i32::MAX),
            validate_only,
            force,
        };
        let server = leader.server.clone();
        let answer = leader
            .client
            .alter_quorum(request)
            .map_err(|e| client_error(&server, "AlterQuorum", e))?;
        refused(answer.error, &server, "AlterQuorum")?;
        if is_leader_moved(answer.error) {
            return Err(Retryable::Retry(format!(
                "{server}: AlterQuorum: {}",
                answer.error
            )));
        }
        Ok((answer, leader.quorum.clone()))
    };
    let started = Instant::now();
    loop {
        let (answer, quorum) = admin.with_leader_until(deadline, attempt)?;
        if answer.error.is_none() {
            return Ok((answer, quorum));
        }
        if answer.error == ErrorCode::REQUEST_TIMED_OUT && Instant::now() < deadline {
            continue;
        }
        // A leader elected moments ago has not heard every observer yet (each finds it after
        // its fetch timeout): a node it does not know is asked about again for a while; a
        // node no leader ever heard (a typo) fails after that.
        let settling = started.elapsed() < UNKNOWN_VOTER_GRACE;
        if answer.error == ErrorCode::UNKNOWN_VOTER_ID && settling && Instant::now() < deadline {
            std::thread::sleep(POLL);
            continue;
        }
        return Err(rejection(&answer).into());
    }
}

/// The leader moved or is not known yet: find it again and repeat.
fn is_leader_moved(error: ErrorCode) -> bool {
    [
        ErrorCode::NOT_QUORUM_LEADER,
        ErrorCode::NOT_LEADER_OR_FOLLOWER,
        ErrorCode::FENCED_LEADER_EPOCH,
        ErrorCode::BROKER_NOT_AVAILABLE,
    ]
    .contains(&error)
}

/// The operator's sentence for a refused AlterQuorum: the error's name, the leader's reason,
/// and each target voter it refused.
fn rejection(answer: &AlterQuorumResponse) -> String {
    let mut text = format!("AlterQuorum: {}", answer.error);
    if answer.error == ErrorCode::REQUEST_TIMED_OUT {
        text.push_str(" (the target was not committed before the deadline; --timeout-ms)");
    }
    if let Some(why) = &answer.error_message {
        text.push_str(&format!(": {why}"));
    }
    for voter in answer.target_voters.iter().filter(|v| !v.error.is_none()) {
        text.push_str(&format!("\n  voter {}: {}", voter.voter_id, voter.error));
        if voter.error == ErrorCode::UNKNOWN_VOTER_ID {
            text.push_str(
                " (it has never fetched from the leader: start it with the cluster's \
                 quorum.voters and wait until `describe --replication` lists it as an Observer)",
            );
        }
    }
    text
}

/// Polls the leader until the voters are `target` and no target is recorded.
fn wait_for(admin: &Admin, deadline: Instant, target: &[NodeId]) -> Result<(), Failure> {
    let mut last_seen: Option<(Vec<NodeId>, Option<Vec<NodeId>>)> = None;
    loop {
        let quorum = describe(admin, deadline)?;
        let seen = (
            voter_ids(&quorum),
            quorum.target_voters.as_deref().map(replica_ids),
        );
        if seen.0 == target && seen.1.is_none() {
            outln!("Reassignment complete: CurrentVoters {}", list(&seen.0))?;
            return Ok(());
        }
        if seen.1.as_deref().is_some_and(|t| t != target) || (seen.1.is_none() && seen.0 != target)
        {
            return Err(format!(
                "the target changed under this command: CurrentVoters {}, TargetVoters {} \
                 (another reassign or a cancel)",
                list(&seen.0),
                seen.1.as_deref().map_or("none".into(), list)
            )
            .into());
        }
        if last_seen.as_ref() != Some(&seen) {
            outln!(
                "CurrentVoters {}  TargetVoters {}",
                list(&seen.0),
                list(target)
            )?;
            last_seen = Some(seen);
        }
        if Instant::now() + POLL >= deadline {
            return Err(format!(
                "the voters did not reach {} within the deadline (--timeout-ms); the leader \
                 goes on: `ringraft quorum reassign --verify` or `describe --replication` \
                 shows which new voter has not caught up",
                list(target)
            )
            .into());
        }
        std::thread::sleep(POLL);
    }
}

fn verify(admin: &Admin, deadline: Instant) -> Result<(), Failure> {
    let quorum = describe(admin, deadline)?;
    let voters = voter_ids(&quorum);
    match &quorum.target_voters {
        None => {
            outln!(
                "No reassignment in progress; CurrentVoters: {}",
                list(&voters)
            )?;
            Ok(())
        }
        Some(target) => {
            outln!(
                "Reassignment in progress: CurrentVoters {}  TargetVoters {}",
                list(&voters),
                list(&replica_ids(target))
            )?;
            Err("the reassignment has not finished".into())
        }
    }
}

fn describe(admin: &Admin, deadline: Instant) -> Result<DescribeQuorumResponse, AdminError> {
    admin.with_leader_until(deadline, |leader| Ok(leader.quorum.clone()))
}

/// Voters the leader also lists as observers with another directory: the same id came back
/// with an empty disk.
fn lost_voters(quorum: &DescribeQuorumResponse) -> Vec<NodeId> {
    quorum
        .current_voters
        .iter()
        .filter(|v| {
            quorum.observers.iter().any(|o| {
                o.replica_id == v.replica_id
                    && !o.directory_id.is_zero()
                    && o.directory_id != v.directory_id
            })
        })
        .map(|v| v.replica_id)
        .collect()
}

/// The directory id the leader reports for `id` (zero when it knows none).
fn known_directory(quorum: &DescribeQuorumResponse, id: NodeId) -> DirectoryId {
    quorum
        .current_voters
        .iter()
        .chain(&quorum.observers)
        .find(|r| r.replica_id == id)
        .map_or(DirectoryId::ZERO, |r| r.directory_id)
}

fn voter_ids(quorum: &DescribeQuorumResponse) -> Vec<NodeId> {
    replica_ids(&quorum.current_voters)
}

fn replica_ids(replicas: &[engine::raft::ReplicaState]) -> Vec<NodeId> {
    let mut ids: Vec<NodeId> = replicas.iter().map(|r| r.replica_id).collect();
    ids.sort_unstable();
    ids
}

fn list(ids: &[NodeId]) -> String {
    let joined: Vec<String> = ids.iter().map(NodeId::to_string).collect();
    format!("[{}]", joined.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::raft::AlterQuorumVoterResult;

    #[test]
    fn voters_are_parsed_sorted_and_checked() {
        assert_eq!(parse_voters("4, 1,2").unwrap(), vec![1, 2, 4]);
        assert!(parse_voters("1,1").unwrap_err().contains("twice"));
        assert!(parse_voters("1,x").unwrap_err().contains("\"x\""));
        assert!(parse_voters("-1").is_err());
        assert!(parse_voters("").is_err());
    }

    #[test]
    fn a_rejection_names_the_error_and_each_refused_voter() {
        let answer = AlterQuorumResponse {
            error: ErrorCode::UNKNOWN_VOTER_ID,
            error_message: Some("a target voter never fetched from this leader".into()),
            leader_id: 1,
            leader_epoch: 3,
            target_voters: vec![
                AlterQuorumVoterResult {
                    voter_id: 1,
                    error: ErrorCode::NONE,
                },
                AlterQuorumVoterResult {
                    voter_id: 9,
                    error: ErrorCode::UNKNOWN_VOTER_ID,
                },
            ],
        };
        let text = rejection(&answer);
        assert!(
            text.starts_with("AlterQuorum: UNKNOWN_VOTER_ID (206): a target voter"),
            "{text}"
        );
        assert!(
            text.contains("voter 9: UNKNOWN_VOTER_ID (206) (it has never fetched"),
            "{text}"
        );
        assert!(!text.contains("voter 1:"), "{text}");
    }
}
