//! `ringraft quorum`: Kafka's `kafka-metadata-quorum` for a ringraft cluster
//! (docs/operations.md, "The quorum tool"). `describe --status` and `describe --replication`
//! print Kafka's labels and columns; the older `quorum --describe` keeps its output.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args, Subcommand};
use engine::raft::{DescribeQuorumResponse, ReplicaState};
use serde_json::json;

use crate::admin::{Admin, Leader, Retryable};
use crate::client_config::ClientSettings;
use crate::quorum_reassign::{parse_voters, Reassign};
use crate::Failure;

#[derive(Args)]
pub struct QuorumArgs {
    /// `host:port[,host:port...]`: any node's client listener; the tool finds the leader.
    #[arg(long, global = true)]
    bootstrap_server: Option<String>,
    /// Properties for a listener that is not PLAINTEXT: `security.protocol`,
    /// `ssl.truststore.location`, `ssl.keystore.location`, `sasl.mechanism`,
    /// `sasl.username`, `sasl.password` (docs/security.md).
    #[arg(long, global = true)]
    command_config: Option<PathBuf>,
    /// How long a command may wait for a leader (elections, a leader that moves), in ms.
    #[arg(long, global = true, default_value_t = 30_000)]
    timeout_ms: u64,
    /// The first form of `describe`: the leader's answer, one line per replica.
    #[arg(long)]
    describe: bool,
    /// With --describe: one JSON line.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    action: Option<QuorumAction>,
}

#[derive(Subcommand)]
enum QuorumAction {
    /// Describe the quorum, as `kafka-metadata-quorum describe` does.
    #[command(group(ArgGroup::new("what").required(true).args(["status", "replication"])))]
    Describe {
        /// ClusterId, LeaderId, LeaderEpoch, HighWatermark, MaxFollowerLag,
        /// MaxFollowerLagTimeMs, CurrentVoters, CurrentObservers, TargetVoters.
        #[arg(long)]
        status: bool,
        /// One row per replica: NodeId, DirectoryId, LogEndOffset, Lag, LastFetchTimestamp,
        /// LastCaughtUpTimestamp, Status.
        #[arg(long)]
        replication: bool,
        /// Times as durations ("123 ms ago") instead of epoch milliseconds.
        #[arg(long)]
        human_readable: bool,
        /// One JSON document, keyed by the same labels.
        #[arg(long)]
        json: bool,
    },
    /// Change the voter set (AlterQuorum): the leader adds and removes one voter per committed
    /// step; the command returns once the target is recorded and committed.
    #[command(group(ArgGroup::new("what").required(true).args(["voters", "cancel", "verify"])))]
    Reassign {
        /// The voters wanted, `1,2,4`: each must have fetched from the leader (started with
        /// the cluster's quorum.voters, it shows as an Observer in `describe --replication`).
        #[arg(long)]
        voters: Option<String>,
        /// Stop a reassignment in progress where it stands (the voters now become the target).
        #[arg(long)]
        cancel: bool,
        /// Whether a reassignment is in progress: exits 0 when none is, 1 when one is.
        #[arg(long)]
        verify: bool,
        /// Then wait until the voters are the target (up to --timeout-ms).
        #[arg(long, conflicts_with = "verify")]
        wait: bool,
        /// Let a step go ahead even when the new set would not have a live, caught-up
        /// majority (the leader refuses such a step otherwise and waits).
        #[arg(long, requires = "voters")]
        force: bool,
        /// Ask the leader to check the request and change nothing.
        #[arg(long, requires = "voters")]
        dry_run: bool,
    },
}

pub fn run(args: QuorumArgs) -> Result<(), Failure> {
    let settings = match &args.command_config {
        Some(path) => ClientSettings::load(path)?,
        None => ClientSettings::plaintext(),
    };
    let servers = args
        .bootstrap_server
        .as_deref()
        .ok_or("--bootstrap-server is required")?;
    let admin = Admin::new(servers, &settings, Duration::from_millis(args.timeout_ms))
        .map_err(|e| e.to_string())?;
    if args.action.is_some() && (args.describe || args.json) {
        return Err("--describe and --json go without a subcommand (`describe --json`)".into());
    }
    match args.action {
        None if args.describe => {
            let leader = describe(&admin)?;
            if args.json {
                outln!("{}", legacy_json(&leader.quorum))?;
            } else {
                print_legacy(&leader.quorum)?;
            }
            Ok(())
        }
        None => Err(
            "nothing to do: pass `describe --status`, `describe --replication` or --describe"
                .into(),
        ),
        Some(QuorumAction::Reassign {
            voters,
            cancel,
            verify,
            wait,
            force,
            dry_run,
        }) => {
            let what = match voters {
                Some(voters) => Reassign::To {
                    voters: parse_voters(&voters)?,
                    force,
                    dry_run,
                    wait,
                },
                None if cancel => Reassign::Cancel { wait },
                None => {
                    debug_assert!(verify, "clap requires one of --voters, --cancel, --verify");
                    Reassign::Verify
                }
            };
            crate::quorum_reassign::run(&admin, what)
        }
        Some(QuorumAction::Describe {
            status,
            replication: _,
            human_readable,
            json,
        }) => {
            let leader = describe(&admin)?;
            let now = wall_clock_ms();
            let rendered = if status {
                Status::of(&leader).render(human_readable, json)
            } else {
                render_replication(&replication_rows(&leader.quorum), now, human_readable, json)
            };
            outln!("{rendered}")?;
            Ok(())
        }
    }
}

/// What the leader answered, and the cluster's id.
struct Described {
    quorum: DescribeQuorumResponse,
    cluster_id: String,
}

/// The leader's DescribeQuorum answer (found and retried as [`Admin`] does: the leader it
/// finds has just answered it).
fn describe(admin: &Admin) -> Result<Described, Failure> {
    admin
        .with_leader(|leader: &mut Leader| -> Result<_, Retryable> {
            Ok(Described {
                quorum: leader.quorum.clone(),
                cluster_id: leader.cluster_id.clone(),
            })
        })
        .map_err(|e| Failure::Message(e.to_string()))
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn ids(list: &[ReplicaState]) -> Vec<i32> {
    list.iter().map(|r| r.replica_id).collect()
}

fn id_list(ids: &[i32]) -> String {
    let joined: Vec<String> = ids.iter().map(i32::to_string).collect();
    format!("[{}]", joined.join(","))
}

/// `describe --status`, computed as Kafka's tool computes it: the lag of the voter furthest
/// behind the leader's log end, and how much longer ago it last caught up than the leader.
#[derive(Debug, PartialEq, Eq)]
struct Status {
    cluster_id: String,
    leader_id: i32,
    leader_epoch: i32,
    high_watermark: i64,
    max_follower_lag: i64,
    max_follower_lag_time_ms: i64,
    current_voters: Vec<i32>,
    current_observers: Vec<i32>,
    target_voters: Option<Vec<i32>>,
}

impl Status {
    fn of(leader: &Described) -> Status {
        let q = &leader.quorum;
        let own = q
            .current_voters
            .iter()
            .find(|v| v.replica_id == q.leader_id);
        let furthest = q.current_voters.iter().min_by_key(|v| v.log_end_offset);
        let (max_follower_lag, max_follower_lag_time_ms) = match (own, furthest) {
            (Some(own), Some(furthest)) => {
                let lag = (own.log_end_offset - furthest.log_end_offset).max(0);
                let time = if furthest.replica_id == own.replica_id || lag == 0 {
                    0
                } else if own.last_caught_up_timestamp >= 0
                    && furthest.last_caught_up_timestamp >= 0
                {
                    (own.last_caught_up_timestamp - furthest.last_caught_up_timestamp).max(0)
                } else {
                    -1
                };
                (lag, time)
            }
            _ => (-1, -1),
        };
        Status {
            cluster_id: leader.cluster_id.clone(),
            leader_id: q.leader_id,
            leader_epoch: q.leader_epoch,
            high_watermark: q.high_watermark,
            max_follower_lag,
            max_follower_lag_time_ms,
            current_voters: ids(&q.current_voters),
            current_observers: ids(&q.observers),
            target_voters: q.target_voters.as_deref().map(ids),
        }
    }

    fn render(&self, human_readable: bool, json: bool) -> String {
        if json {
            return json!({
                "ClusterId": self.cluster_id,
                "LeaderId": self.leader_id,
                "LeaderEpoch": self.leader_epoch,
                "HighWatermark": self.high_watermark,
                "MaxFollowerLag": self.max_follower_lag,
                "MaxFollowerLagTimeMs": self.max_follower_lag_time_ms,
                "CurrentVoters": self.current_voters,
                "CurrentObservers": self.current_observers,
                "TargetVoters": self.target_voters,
            })
            .to_string();
        }
        let lag_time = if human_readable && self.max_follower_lag_time_ms >= 0 {
            format!("{} ms", self.max_follower_lag_time_ms)
        } else {
            self.max_follower_lag_time_ms.to_string()
        };
        let lines = [
            ("ClusterId", self.cluster_id.clone()),
            ("LeaderId", self.leader_id.to_string()),
            ("LeaderEpoch", self.leader_epoch.to_string()),
            ("HighWatermark", self.high_watermark.to_string()),
            ("MaxFollowerLag", self.max_follower_lag.to_string()),
            ("MaxFollowerLagTimeMs", lag_time),
            ("CurrentVoters", id_list(&self.current_voters)),
            ("CurrentObservers", id_list(&self.current_observers)),
            (
                "TargetVoters",
                self.target_voters.as_deref().map_or("none".into(), id_list),
            ),
        ];
        lines
            .iter()
            .map(|(label, value)| format!("{:<24}{value}", format!("{label}:")))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// One row of `describe --replication`.
#[derive(Debug, PartialEq, Eq)]
struct Row {
    node_id: i32,
    directory_id: String,
    log_end_offset: i64,
    lag: i64,
    last_fetch_timestamp: i64,
    last_caught_up_timestamp: i64,
    status: &'static str,
}

const COLUMNS: [&str; 7] = [
    "NodeId",
    "DirectoryId",
    "LogEndOffset",
    "Lag",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
];

/// The leader first, then the other voters, then the observers (Kafka's order); the lag of
/// each is the leader's log end minus its own (-1 when its log end is unknown).
fn replication_rows(q: &DescribeQuorumResponse) -> Vec<Row> {
    let leader_end = q
        .current_voters
        .iter()
        .find(|v| v.replica_id == q.leader_id)
        .map_or(-1, |v| v.log_end_offset);
    let row = |r: &ReplicaState, status| Row {
        node_id: r.replica_id,
        directory_id: directory_id(r),
        log_end_offset: r.log_end_offset,
        lag: if r.log_end_offset < 0 || leader_end < 0 {
            -1
        } else {
            (leader_end - r.log_end_offset).max(0)
        },
        last_fetch_timestamp: r.last_fetch_timestamp,
        last_caught_up_timestamp: r.last_caught_up_timestamp,
        status,
    };
    let leader = q
        .current_voters
        .iter()
        .filter(|v| v.replica_id == q.leader_id);
    let followers = q
        .current_voters
        .iter()
        .filter(|v| v.replica_id != q.leader_id);
    leader
        .map(|r| row(r, "Leader"))
        .chain(followers.map(|r| row(r, "Follower")))
        .chain(q.observers.iter().map(|r| row(r, "Observer")))
        .collect()
}

/// Kafka's uuid text of the replica's log directory id (all zeros, `AAAAAAAAAAAAAAAAAAAAAA`,
/// when the leader does not know it).
fn directory_id(replica: &ReplicaState) -> String {
    replica.directory_id.to_string()
}

/// A timestamp as printed: epoch ms, or with --human-readable how long before `now`.
fn timestamp(ms: i64, now: i64, human_readable: bool) -> String {
    match (human_readable, ms) {
        (_, ms) if ms < 0 => "-1".into(),
        (true, ms) => format!("{} ms ago", (now - ms).max(0)),
        (false, ms) => ms.to_string(),
    }
}

fn render_replication(rows: &[Row], now: i64, human_readable: bool, json: bool) -> String {
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.node_id.to_string(),
                r.directory_id.clone(),
                r.log_end_offset.to_string(),
                r.lag.to_string(),
                timestamp(r.last_fetch_timestamp, now, human_readable),
                timestamp(r.last_caught_up_timestamp, now, human_readable),
                r.status.to_string(),
            ]
        })
        .collect();
    if json {
        let objects: Vec<serde_json::Value> = rows
            .iter()
            .zip(&cells)
            .map(|(r, c)| {
                json!({
                    "NodeId": r.node_id,
                    "DirectoryId": r.directory_id,
                    "LogEndOffset": r.log_end_offset,
                    "Lag": r.lag,
                    "LastFetchTimestamp": if human_readable { json!(c[4]) } else { json!(r.last_fetch_timestamp) },
                    "LastCaughtUpTimestamp": if human_readable { json!(c[5]) } else { json!(r.last_caught_up_timestamp) },
                    "Status": r.status,
                })
            })
            .collect();
        return serde_json::Value::Array(objects).to_string();
    }
    table(&COLUMNS.map(String::from), &cells)
}

/// Columns padded to their widest cell, two spaces apart, the header first.
fn table(header: &[String; 7], rows: &[[String; 7]]) -> String {
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    std::iter::once(header)
        .chain(rows)
        .map(|row| {
            let padded: Vec<String> = row
                .iter()
                .zip(widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect();
            padded.join("  ").trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `quorum --describe`'s lag: how far a replica's log end is below the high watermark.
fn lag_below_hw(leo: i64, hw: i64) -> i64 {
    if leo < 0 || hw < 0 {
        -1
    } else {
        (hw - leo).max(0)
    }
}

fn print_legacy(r: &DescribeQuorumResponse) -> std::io::Result<()> {
    outln!(
        "leader: {}  epoch: {}  high watermark: {}  error: {}",
        r.leader_id,
        r.leader_epoch,
        r.high_watermark,
        r.error
    )?;
    let print = |kind: &str, replicas: &[ReplicaState]| -> std::io::Result<()> {
        for s in replicas {
            outln!(
                "  {kind} {:>4}  log end offset {:>10}  lag {:>8}  last fetch {:>14}  last caught up {:>14}",
                s.replica_id,
                s.log_end_offset,
                lag_below_hw(s.log_end_offset, r.high_watermark),
                s.last_fetch_timestamp,
                s.last_caught_up_timestamp
            )?;
        }
        Ok(())
    };
    print("voter   ", &r.current_voters)?;
    print("observer", &r.observers)
}

fn legacy_json(r: &DescribeQuorumResponse) -> serde_json::Value {
    let replicas = |list: &[ReplicaState]| -> Vec<serde_json::Value> {
        list.iter()
            .map(|s| {
                json!({
                    "id": s.replica_id,
                    "logEndOffset": s.log_end_offset,
                    "lag": lag_below_hw(s.log_end_offset, r.high_watermark),
                    "lastFetchTimestamp": s.last_fetch_timestamp,
                    "lastCaughtUpTimestamp": s.last_caught_up_timestamp,
                })
            })
            .collect()
    };
    json!({
        "error": r.error.0,
        "leaderId": r.leader_id,
        "leaderEpoch": r.leader_epoch,
        "highWatermark": r.high_watermark,
        "voters": replicas(&r.current_voters),
        "observers": replicas(&r.observers),
    })
}
