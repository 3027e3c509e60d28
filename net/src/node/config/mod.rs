//! `server.properties`: the node's configuration (docs/configuration.md).
//!
//! Kafka-style keys. An unknown key, a bad value or a missing required key is an error that
//! names the key, so a typo never silently falls back to a default.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use engine::raft::{NodeId, RaftConfig, VoterEndpoint};
use thiserror::Error;

use crate::security::authorizer::parse_super_users;
use crate::security::principal::{KafkaPrincipal, ReplicaPrincipals};

mod listeners;

pub use crate::security::tls::ClientAuth;
pub use listeners::{Listener, Listeners, SecurityProtocol, SslSettings};

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a properties file: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("unknown configuration key `{key}`")]
    UnknownKey { key: String },
    #[error("missing required configuration key `{key}`")]
    Missing { key: &'static str },
    #[error("bad value for `{key}`: `{value}`: {reason}")]
    BadValue {
        key: String,
        value: String,
        reason: String,
    },
    #[error("--override takes key=value, got `{0}`")]
    BadOverride(String),
    #[error(
        "listeners={listener} is a wildcard address, which the other nodes cannot connect to: \
         set `advertised.listeners` to the NAME://host:port they should use"
    )]
    WildcardWithoutAdvertised { listener: String },
}

/// A voter as `quorum.voters` names it: `id@host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoterAddress {
    pub id: NodeId,
    pub host: String,
    pub port: u16,
}

impl fmt::Display for VoterAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}:{}", self.id, self.host, self.port)
    }
}

impl VoterAddress {
    /// Resolves the address (the first one the resolver gives).
    pub fn socket_addr(&self) -> std::io::Result<SocketAddr> {
        crate::client::resolve_host_port(&self.host, self.port)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    pub broker_id: NodeId,
    pub cluster_id: String,
    /// Every listener (`listeners`, `listener.security.protocol.map`, `controller.listener.names`).
    pub listeners: Listeners,
    /// Where the controller listener listens (the voters' listener, e.g.
    /// `CONTROLLER://127.0.0.1:9093`; the only listener when there is one).
    pub listener: (String, u16),
    /// The host and port the other nodes are told to connect to for the controller listener
    /// (`advertised.listeners`; the listener when unset). Never a wildcard address.
    pub advertised: (String, u16),
    pub security: SecuritySettings,
    pub log_dir: PathBuf,
    /// The initial voter set with endpoints. Empty for an observer that uses bootstrap servers.
    pub voters: Vec<VoterAddress>,
    pub bootstrap_servers: Vec<(String, u16)>,
    pub fetch_timeout_ms: u64,
    pub election_timeout_ms: u64,
    pub election_jitter_max_ms: u64,
    pub progress_timeout_ms: u64,
    pub request_timeout_ms: u64,
    pub retry_backoff_ms: u64,
    pub retry_backoff_max_ms: u64,
    /// `quorum.prevote.enable`: stand for election through a pre-vote round first.
    pub pre_vote: bool,
    /// `quorum.lease.enable`: the leader lease (docs/consistency.md, "The leader lease").
    pub lease: bool,
    /// `quorum.lease.clock.drift.percent`: the clock-drift bound the lease assumes.
    pub lease_drift_percent: u64,
    /// `quorum.observer.fetch.interval.ms`: as leader, answer an observer whose last answer
    /// gave it everything there was with records at most once per this many ms
    /// (docs/protocol.md, "Observer fetch pacing").
    pub observer_fetch_interval_ms: u64,
    pub segment_bytes: u64,
    /// `retention.bytes` and `retention.ms` (docs/operations.md, "Retention").
    pub retention: engine::log::RetentionPolicy,
    /// `log.retention.check.interval.ms`: how often retention runs.
    pub retention_check_interval_ms: u64,
    pub max_request_bytes: usize,
    pub raft_cpu: Option<usize>,
    pub log_cpu: Option<usize>,
    /// The log reader's budget for catch-up reads, bytes/s (None: unpaced).
    pub log_read_bytes_per_sec: Option<u64>,
    /// `log.sync.mode`: how a group is made durable, or `auto` to measure both at start
    /// (docs/configuration.md).
    pub log_sync_mode: engine::io::SyncModeSetting,
    /// `metrics.listener=http://host:port`: where `/metrics` is served (None: no listener).
    pub metrics_listener: Option<(String, u16)>,
    /// `log.format`: how log lines are written.
    pub log_format: LogFormat,
    /// The group coordinator's bounds (`group.*`, `offset.metadata.max.bytes`;
    /// docs/configuration.md).
    pub group_limits: engine::groups::GroupLimits,
}

/// `log.format`: text (human-readable lines) or json (one JSON object per line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Who may do what (docs/security.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecuritySettings {
    /// `sasl.credentials.file`: the SCRAM credentials (`ringraft credentials`). Required when a
    /// listener uses SASL.
    pub credentials_file: Option<PathBuf>,
    /// `authorizer.acl.file`: the ACLs; None: every principal may do everything (the node says
    /// so at start-up).
    pub acl_file: Option<PathBuf>,
    /// `super.users` (`User:a;User:b`).
    pub super_users: Vec<KafkaPrincipal>,
    /// `allow.everyone.if.no.acl.found`: true when no ACL file is configured.
    pub allow_everyone_if_no_acl_found: bool,
    /// `quorum.replica.principal`: the principal of replica `{id}`.
    pub replica_principals: ReplicaPrincipals,
    /// `ssl.handshake.timeout.ms`.
    pub handshake_timeout_ms: u64,
    /// `connection.failed.authentication.delay.ms`: how long a connection whose SASL
    /// authentication failed stays open (answered, nothing more read) before it is closed.
    pub failed_authentication_delay_ms: u64,
}

/// Every key the node accepts, with its default (None = required or no default) and meaning.
/// docs/configuration.md is written from this table.
pub const KEYS: &[(&str, Option<&str>, &str)] = &[
    ("broker.id", None, "this node's id; also its voter id"),
    (
        "cluster.id",
        None,
        "the cluster's id; every request must carry it",
    ),
    (
        "listeners",
        None,
        "where to listen, `NAME://host:port,...` (e.g. `CLIENT://0.0.0.0:9092,CONTROLLER://10.0.0.1:9093`), or one `host:port` (PLAINTEXT, serving everything)",
    ),
    (
        "advertised.listeners",
        Some(""),
        "the `NAME://host:port` others are told to connect to, per listener; defaults to the listener",
    ),
    (
        "listener.security.protocol.map",
        Some("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
        "the security protocol of each listener, `NAME:PROTOCOL,...` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
    ),
    (
        "controller.listener.names",
        Some(""),
        "the listener voters use for each other (quorum RPCs are served only there); required with more than one listener",
    ),
    (
        "ssl.keystore.type",
        Some("PEM"),
        "only PEM; per listener as `listener.name.<name>.ssl.keystore.type`, as every ssl.* key",
    ),
    (
        "ssl.keystore.location",
        Some(""),
        "PEM file with this node's private key and certificate chain",
    ),
    ("ssl.truststore.type", Some("PEM"), "only PEM"),
    (
        "ssl.truststore.location",
        Some(""),
        "PEM file with the CA certificates peers are checked against",
    ),
    (
        "ssl.client.auth",
        Some("none"),
        "required, requested or none; the controller listener must use required",
    ),
    (
        "ssl.principal.mapping.rules",
        Some("DEFAULT"),
        "Kafka's rules from a certificate's subject to a principal name",
    ),
    (
        "ssl.endpoint.identification.algorithm",
        Some("https"),
        "https (the only choice): a node checks that a peer's certificate names the host it dialled",
    ),
    (
        "ssl.enabled.protocols",
        Some("TLSv1.2,TLSv1.3"),
        "the TLS versions offered and accepted",
    ),
    (
        "ssl.cipher.suites",
        Some(""),
        "IANA names of the cipher suites allowed, preferred first; empty: all, AES-128-GCM first",
    ),
    (
        "ssl.handshake.timeout.ms",
        Some("10000"),
        "a TLS connection that has not finished its handshake by then is closed",
    ),
    (
        "sasl.enabled.mechanisms",
        Some("SCRAM-SHA-512"),
        "SASL mechanisms served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (per listener too)",
    ),
    (
        "sasl.credentials.file",
        Some(""),
        "the SCRAM credentials file (`ringraft credentials`); required when a listener uses SASL",
    ),
    (
        "connection.failed.authentication.delay.ms",
        Some("100"),
        "a connection whose SASL authentication failed is closed this long after the failure is answered; nothing more is read from it meanwhile",
    ),
    (
        "authorizer.acl.file",
        Some(""),
        "the ACL file; unset: every principal may do everything",
    ),
    (
        "super.users",
        Some(""),
        "principals allowed everything, `User:a;User:b`",
    ),
    (
        "allow.everyone.if.no.acl.found",
        Some(""),
        "allow an operation no ACL names; defaults to true without an ACL file, false with one",
    ),
    (
        "quorum.replica.principal",
        Some("User:ringraft-{id}"),
        "the principal replica `{id}` authenticates as; a quorum request naming a replica is accepted only from its principal",
    ),
    (
        "log.dirs",
        None,
        "the directory of the log and the quorum-state file (one directory)",
    ),
    (
        "quorum.voters",
        Some(""),
        "the initial voters, `id@host:port,...` (first start only)",
    ),
    (
        "bootstrap.servers",
        Some(""),
        "servers an observer asks to find the quorum, `host:port,...`",
    ),
    (
        "quorum.fetch.timeout.ms",
        Some("2000"),
        "a follower without a successful fetch for this long starts an election",
    ),
    (
        "quorum.election.timeout.ms",
        Some("1000"),
        "a candidate without a majority for this long retries",
    ),
    (
        "quorum.election.jitter.max.ms",
        Some("1000"),
        "maximum random delay added before an election",
    ),
    (
        "quorum.progress.timeout.ms",
        Some("3000"),
        "a leader without fetches from a majority for this long resigns",
    ),
    (
        "quorum.request.timeout.ms",
        Some("2000"),
        "a request without a response for this long fails",
    ),
    (
        "quorum.retry.backoff.ms",
        Some("20"),
        "first delay before a failed request is retried",
    ),
    (
        "quorum.retry.backoff.max.ms",
        Some("1000"),
        "cap of the exponential retry backoff",
    ),
    (
        "quorum.prevote.enable",
        Some("true"),
        "ask the other voters for pre-votes (no epoch raised, nothing persisted) before standing for election; false: stand at once",
    ),
    (
        "quorum.lease.enable",
        Some("true"),
        "the leader lease: a leader answers clients as leader only while a majority echoed one of its fetch answers within the lease (docs/consistency.md); needs quorum.prevote.enable",
    ),
    (
        "quorum.lease.clock.drift.percent",
        Some("10"),
        "how far two nodes' clocks may disagree on an elapsed time, in percent (1-50); the lease runs quorum.fetch.timeout.ms x (1 - drift)",
    ),
    (
        "quorum.observer.fetch.interval.ms",
        Some("10"),
        "as leader, answer an observer whose last answer gave it everything there was with records at most once per this many ms, so that one answer carries what many would (0: at once)",
    ),
    (
        "log.segment.bytes",
        Some("1073741824"),
        "size at which a log segment is rolled",
    ),
    (
        "retention.bytes",
        Some("-1"),
        "delete the oldest whole segments, once committed, while the rest is still this many bytes; -1: no size limit (docs/operations.md, \"Retention\")",
    ),
    (
        "retention.ms",
        Some("-1"),
        "delete a whole segment, once committed, when its newest record is older than this; -1 (unlike Kafka's 7 days): the log is the metadata, nothing leaves unless asked",
    ),
    (
        "log.retention.check.interval.ms",
        Some("300000"),
        "how often retention looks for segments to delete",
    ),
    (
        "group.coordinator.max.groups",
        Some("1000"),
        "consumer groups with members the coordinator (the leader) holds at once, and groups with committed offsets it accepts commits for; one more is answered COORDINATOR_NOT_AVAILABLE (a ringraft bound, Kafka has none)",
    ),
    (
        "group.max.size",
        Some("1000"),
        "members of one consumer group; one more is answered GROUP_MAX_SIZE_REACHED",
    ),
    (
        "group.coordinator.max.members",
        Some("10000"),
        "members of every consumer group together (a ringraft bound)",
    ),
    (
        "group.min.session.timeout.ms",
        Some("6000"),
        "shortest session timeout a member may ask for",
    ),
    (
        "group.max.session.timeout.ms",
        Some("1800000"),
        "longest session timeout a member may ask for",
    ),
    (
        "group.initial.rebalance.delay.ms",
        Some("3000"),
        "how long the first rebalance of an empty group waits for more members",
    ),
    (
        "offset.metadata.max.bytes",
        Some("4096"),
        "largest metadata string of one committed offset",
    ),
    (
        "offsets.retention.minutes",
        Some("10080"),
        "how long the committed offsets of a group without members are kept after their commit (and after the group's last member left, or the leader took over); then the leader deletes them through the log",
    ),
    (
        "offsets.retention.check.interval.ms",
        Some("600000"),
        "how often the leader looks for expired committed offsets",
    ),
    (
        "socket.request.max.bytes",
        Some("104857600"),
        "largest frame accepted",
    ),
    (
        "max.connections",
        Some("1024"),
        "connections each listener keeps open at once; one more is closed as soon as it is accepted. Each listener counts only its own (per listener, unlike Kafka's broker-wide limit), so clients that fill a client listener cannot shut the voters out of the controller listener; listener.name.NAME.max.connections sets one listener's",
    ),
    (
        "max.connections.per.ip",
        Some("2147483647"),
        "connections each listener keeps open at once from one IP address; one more from it is closed as soon as it is accepted. Counted per listener, as max.connections (Kafka counts broker-wide); on a single listener the voters' own connections count too. 0 only with overrides; listener.name.NAME.max.connections.per.ip sets one listener's",
    ),
    (
        "max.connections.per.ip.overrides",
        Some(""),
        "ADDRESS:N,...: the limit of max.connections.per.ip for those IP addresses (0: none of theirs is kept); IP addresses only, IPv6 with or without brackets (Kafka also takes host names)",
    ),
    (
        "raft.cpu",
        Some(""),
        "pin the raft thread (sockets, Raft core) to this CPU",
    ),
    (
        "log.cpu",
        Some(""),
        "pin the log thread (io_uring writer) to this CPU",
    ),
    (
        "log.read.max.bytes.per.sec",
        Some("33554432"),
        "budget of the log reader thread for catch-up reads (0 = unpaced)",
    ),
    (
        "log.sync.mode",
        Some("auto"),
        "how a group of appends is made durable: `fdatasync` (an O_DIRECT write with an fdatasync linked behind it), `dsync` (one O_DIRECT write with RWF_DSYNC), or `auto` (whichever is faster on the log's disk, timed at each start)",
    ),
    (
        "metrics.listener",
        Some(""),
        "`http://host:port` where Prometheus metrics are served at /metrics; empty: none",
    ),
    (
        "log.format",
        Some("text"),
        "`text` or `json` (one JSON object per line: ts, level, target, message, fields)",
    ),
];

impl NodeConfig {
    /// Reads `path` and applies `overrides` (`key=value`, later ones win).
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        let file = std::fs::File::open(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let props = java_properties::read(std::io::BufReader::new(file)).map_err(|e| {
            ConfigError::Syntax {
                path: path.to_owned(),
                message: e.to_string(),
            }
        })?;
        let mut map: BTreeMap<String, String> = props.into_iter().collect();
        for o in overrides {
            let (key, value) = o
                .split_once('=')
                .ok_or_else(|| ConfigError::BadOverride(o.clone()))?;
            map.insert(key.trim().to_owned(), value.trim().to_owned());
        }
        Self::from_map(&map)
    }

    /// Builds the configuration from key/value pairs.
    pub fn from_map(map: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        if let Some(key) = map.keys().find(|k| {
            !KEYS.iter().any(|(known, _, _)| known == k) && !listeners::is_listener_override(k, map)
        }) {
            return Err(ConfigError::UnknownKey { key: key.clone() });
        }
        let props = Props(map);
        let listeners = listeners::parse(&props)?;
        let controller = listeners.controller();
        let listener = (controller.host.clone(), controller.port);
        let advertised = controller.advertised.clone();
        let security = security_settings(&props)?;
        if listeners.all.iter().any(|l| l.protocol.uses_sasl())
            && security.credentials_file.is_none()
        {
            return Err(ConfigError::Missing {
                key: "sasl.credentials.file",
            });
        }
        let config = NodeConfig {
            broker_id: props.parse_required("broker.id", parse_node_id)?,
            cluster_id: props.parse_required("cluster.id", parse_cluster_id)?,
            listeners,
            advertised,
            listener,
            security,
            log_dir: props.parse_required("log.dirs", |v| Ok(PathBuf::from(v)))?,
            voters: props.parse_or_default("quorum.voters", parse_voters)?,
            bootstrap_servers: props.parse_or_default("bootstrap.servers", parse_host_ports)?,
            fetch_timeout_ms: props.parse_or_default("quorum.fetch.timeout.ms", parse_positive)?,
            election_timeout_ms: props
                .parse_or_default("quorum.election.timeout.ms", parse_positive)?,
            election_jitter_max_ms: props
                .parse_or_default("quorum.election.jitter.max.ms", parse_u64)?,
            progress_timeout_ms: props
                .parse_or_default("quorum.progress.timeout.ms", parse_positive)?,
            request_timeout_ms: props
                .parse_or_default("quorum.request.timeout.ms", parse_positive)?,
            retry_backoff_ms: props.parse_or_default("quorum.retry.backoff.ms", parse_positive)?,
            retry_backoff_max_ms: props
                .parse_or_default("quorum.retry.backoff.max.ms", parse_positive)?,
            pre_vote: props.parse_or_default("quorum.prevote.enable", parse_bool)?,
            lease: props.parse_or_default("quorum.lease.enable", parse_bool)?,
            lease_drift_percent: props
                .parse_or_default("quorum.lease.clock.drift.percent", parse_drift_percent)?,
            observer_fetch_interval_ms: props
                .parse_or_default("quorum.observer.fetch.interval.ms", parse_u64)?,
            segment_bytes: props.parse_or_default("log.segment.bytes", parse_segment_bytes)?,
            retention: engine::log::RetentionPolicy {
                bytes: props.parse_or_default("retention.bytes", parse_retention_limit)?,
                ms: props
                    .parse_or_default("retention.ms", parse_retention_limit)?
                    .map(|ms| ms as i64),
            },
            retention_check_interval_ms: props
                .parse_or_default("log.retention.check.interval.ms", parse_positive)?,
            max_request_bytes: props.parse_or_default("socket.request.max.bytes", |v| {
                parse_positive(v).map(|n| n as usize)
            })?,
            raft_cpu: props.parse_or_default("raft.cpu", parse_cpu)?,
            log_cpu: props.parse_or_default("log.cpu", parse_cpu)?,
            log_read_bytes_per_sec: props
                .parse_or_default("log.read.max.bytes.per.sec", parse_u64)
                .map(|rate| (rate > 0).then_some(rate))?,
            log_sync_mode: props.parse_or_default("log.sync.mode", parse_sync_mode)?,
            metrics_listener: props.parse_or_default("metrics.listener", parse_metrics_listener)?,
            group_limits: engine::groups::GroupLimits {
                max_groups: props
                    .parse_or_default("group.coordinator.max.groups", parse_positive)?
                    as usize,
                max_group_size: props.parse_or_default("group.max.size", parse_positive)? as usize,
                max_members: props
                    .parse_or_default("group.coordinator.max.members", parse_positive)?
                    as usize,
                min_session_timeout_ms: props
                    .parse_or_default("group.min.session.timeout.ms", parse_positive)?,
                max_session_timeout_ms: props
                    .parse_or_default("group.max.session.timeout.ms", parse_positive)?,
                initial_rebalance_delay_ms: props
                    .parse_or_default("group.initial.rebalance.delay.ms", parse_u64)?,
                max_metadata_bytes: props
                    .parse_or_default("offset.metadata.max.bytes", parse_u64)?
                    as usize,
                offsets_retention_ms: props
                    .parse_or_default("offsets.retention.minutes", parse_minutes_as_ms)?,
                offsets_retention_check_interval_ms: props
                    .parse_or_default("offsets.retention.check.interval.ms", parse_positive)?,
                ..engine::groups::GroupLimits::default()
            },
            log_format: props.parse_or_default("log.format", parse_log_format)?,
        };
        config.check_relations()?;
        Ok(config)
    }

    fn check_relations(&self) -> Result<(), ConfigError> {
        if self.retry_backoff_max_ms < self.retry_backoff_ms {
            return Err(ConfigError::BadValue {
                key: "quorum.retry.backoff.max.ms".into(),
                value: self.retry_backoff_max_ms.to_string(),
                reason: format!("below quorum.retry.backoff.ms ({})", self.retry_backoff_ms),
            });
        }
        self.check_lease()?;
        if self.voters.is_empty() && self.bootstrap_servers.is_empty() {
            return Err(ConfigError::Missing {
                key: "quorum.voters",
            });
        }
        Ok(())
    }

    /// The lease's inequalities (docs/consistency.md, "The leader lease"): it rests on pre-vote,
    /// and it must outlast the wait between a follower's fetches (twice the fetch wait), or
    /// a quiet cluster would refuse its clients between two fetches.
    fn check_lease(&self) -> Result<(), ConfigError> {
        if !self.lease {
            return Ok(());
        }
        if !self.pre_vote {
            return Err(ConfigError::BadValue {
                key: "quorum.lease.enable".into(),
                value: "true".into(),
                reason: "the lease needs quorum.prevote.enable=true (set quorum.lease.enable=false to run without pre-vote)".into(),
            });
        }
        let lease_ms = self.raft_config(0).lease_ms();
        let needed = 2 * engine::raft::RaftConfig::new(0, "", Vec::new()).fetch_max_wait_ms;
        if lease_ms < needed {
            return Err(ConfigError::BadValue {
                key: "quorum.fetch.timeout.ms".into(),
                value: self.fetch_timeout_ms.to_string(),
                reason: format!(
                    "with quorum.lease.enable the lease, quorum.fetch.timeout.ms x (100 - quorum.lease.clock.drift.percent) / 100 = {lease_ms} ms, must be at least {needed} ms (twice the fetch wait)"
                ),
            });
        }
        Ok(())
    }

    /// Whether this node is a voter of the configured (initial) voter set.
    pub fn is_voter(&self) -> bool {
        self.voters.iter().any(|v| v.id == self.broker_id)
    }

    /// The Raft core's configuration.
    /// A warning when the listener the voters use keeps fewer connections from one address
    /// than the voters may open to it from one host: each voter has about two connections to
    /// a peer it talks to (its own requests, a reconnect overlapping the old one), so a lower
    /// `max.connections.per.ip` there can shut voters that share an address out of the quorum.
    pub fn per_ip_limit_warning(&self) -> Option<String> {
        let listener = self.listeners.controller();
        let wanted = 2 * self.voters.len();
        (listener.per_ip_limit.default < wanted).then(|| {
            format!(
                "max.connections.per.ip {} on listener {}, which the voters use: voters that \
                 share an address may need {wanted} connections to this node, so some may be \
                 refused (docs/operations.md, \"Connection limits\")",
                listener.per_ip_limit.default, listener.name
            )
        })
    }

    pub fn raft_config(&self, seed: u64) -> RaftConfig {
        let mut raft = RaftConfig::new(
            self.broker_id,
            self.cluster_id.clone(),
            self.voters.iter().map(|v| v.id).collect(),
        );
        raft.fetch_timeout_ms = self.fetch_timeout_ms;
        raft.election_timeout_ms = self.election_timeout_ms;
        raft.election_jitter_max_ms = self.election_jitter_max_ms;
        raft.progress_timeout_ms = self.progress_timeout_ms;
        raft.request_timeout_ms = self.request_timeout_ms;
        raft.retry_backoff_ms = self.retry_backoff_ms;
        raft.retry_backoff_max_ms = self.retry_backoff_max_ms;
        raft.pre_vote = self.pre_vote;
        raft.lease = self.lease;
        raft.lease_drift_percent = self.lease_drift_percent;
        raft.observer_fetch_interval_ms = self.observer_fetch_interval_ms;
        raft.seed = seed;
        // FindQuorum advertises `advertised.listeners`; the configured voters' endpoints are
        // known from the start (boot timestamp 0, so any advertisement by a running voter
        // replaces them).
        raft.host = self.advertised.0.clone();
        raft.port = i32::from(self.advertised.1);
        raft.voter_endpoints = self
            .voters
            .iter()
            .map(|v| VoterEndpoint {
                voter_id: v.id,
                boot_timestamp: 0,
                host: v.host.clone(),
                port: i32::from(v.port),
            })
            .collect();
        raft
    }
}

struct Props<'a>(&'a BTreeMap<String, String>);

impl Props<'_> {
    fn parse_required<T>(
        &self,
        key: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let value = self
            .0
            .get(key)
            .filter(|v| !v.is_empty())
            .ok_or(ConfigError::Missing { key })?;
        parse(value).map_err(|reason| bad(key, value, reason))
    }

    fn parse_or_default<T>(
        &self,
        key: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let default = KEYS
            .iter()
            .find(|(k, _, _)| *k == key)
            .and_then(|(_, default, _)| *default)
            .expect("every optional key has a default in KEYS");
        let value = self.0.get(key).map(String::as_str).unwrap_or(default);
        parse(value).map_err(|reason| bad(key, value, reason))
    }
}

fn bad(key: &str, value: &str, reason: String) -> ConfigError {
    ConfigError::BadValue {
        key: key.to_owned(),
        value: value.to_owned(),
        reason,
    }
}

/// `http://host:port` (empty: off). Only plain HTTP: the metrics carry no secret, and a TLS
/// front end (or a scrape over a private network) is the operator's choice.
fn parse_metrics_listener(v: &str) -> Result<Option<(String, u16)>, String> {
    let v = v.trim();
    if v.is_empty() {
        return Ok(None);
    }
    let rest = v
        .strip_prefix("http://")
        .ok_or("expected http://host:port (e.g. http://127.0.0.1:9404)")?;
    parse_host_port(rest.trim_end_matches('/')).map(Some)
}

fn parse_log_format(v: &str) -> Result<LogFormat, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err("expected text or json".into()),
    }
}

fn parse_sync_mode(v: &str) -> Result<engine::io::SyncModeSetting, String> {
    use engine::io::{SyncMode, SyncModeSetting};
    match v.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(SyncModeSetting::Auto),
        "fdatasync" => Ok(SyncModeSetting::Fixed(SyncMode::LinkedFdatasync)),
        "dsync" => Ok(SyncModeSetting::Fixed(SyncMode::RwfDsync)),
        _ => Err("expected auto, fdatasync or dsync".into()),
    }
}

fn parse_u64(v: &str) -> Result<u64, String> {
    v.trim()
        .parse::<u64>()
        .map_err(|e| format!("not a non-negative integer ({e})"))
}

fn parse_positive(v: &str) -> Result<u64, String> {
    match parse_u64(v)? {
        0 => Err("must be greater than 0".into()),
        n => Ok(n),
    }
}

/// A positive number of minutes, in milliseconds.
fn parse_minutes_as_ms(v: &str) -> Result<u64, String> {
    parse_positive(v)?
        .checked_mul(60_000)
        .ok_or_else(|| "too large (its milliseconds overflow)".to_string())
}

fn parse_node_id(v: &str) -> Result<NodeId, String> {
    let id: i32 = v
        .trim()
        .parse()
        .map_err(|e| format!("not an integer ({e})"))?;
    if id < 0 {
        return Err("must be >= 0".into());
    }
    Ok(id)
}

fn parse_cluster_id(v: &str) -> Result<String, String> {
    let v = v.trim();
    if v.len() > 255
        || !v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err("use at most 255 of A-Z a-z 0-9 - _ .".into());
    }
    Ok(v.to_owned())
}

fn parse_segment_bytes(v: &str) -> Result<u64, String> {
    let n = parse_u64(v)?;
    if n < 1 << 20 {
        return Err("must be at least 1048576 (1 MiB)".into());
    }
    Ok(n)
}

/// Kafka's retention limits: -1 is none, otherwise a count of bytes or milliseconds (at most
/// i64::MAX, so that it compares with Kafka's timestamps).
fn parse_retention_limit(v: &str) -> Result<Option<u64>, String> {
    match v.trim() {
        "-1" => Ok(None),
        other => {
            let n = parse_u64(other).map_err(|e| format!("{e}; -1 means no limit"))?;
            if n > i64::MAX as u64 {
                return Err("must be at most 9223372036854775807, or -1".into());
            }
            Ok(Some(n))
        }
    }
}

fn parse_cpu(v: &str) -> Result<Option<usize>, String> {
    if v.trim().is_empty() {
        return Ok(None);
    }
    v.trim()
        .parse::<usize>()
        .map(Some)
        .map_err(|e| format!("not a CPU number ({e})"))
}

fn parse_host_port(v: &str) -> Result<(String, u16), String> {
    let (host, port) = v.trim().rsplit_once(':').ok_or("expected host:port")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err("empty host".into());
    }
    let port: u16 = port.parse().map_err(|e| format!("bad port ({e})"))?;
    Ok((host.to_owned(), port))
}

fn is_wildcard(host: &str) -> bool {
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
}

fn optional_path(v: &str) -> Result<Option<PathBuf>, String> {
    Ok(Some(v.trim()).filter(|p| !p.is_empty()).map(PathBuf::from))
}

/// A clock-drift bound in percent: 1 to 50 (docs/consistency.md, "Clocks").
fn parse_drift_percent(v: &str) -> Result<u64, String> {
    match parse_u64(v)? {
        n @ 1..=50 => Ok(n),
        _ => Err("a percentage from 1 to 50".into()),
    }
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("true or false".into()),
    }
}

fn security_settings(props: &Props<'_>) -> Result<SecuritySettings, ConfigError> {
    let acl_file = props.parse_or_default("authorizer.acl.file", optional_path)?;
    let allow_everyone = props.parse_or_default("allow.everyone.if.no.acl.found", |v| {
        if v.trim().is_empty() {
            Ok(acl_file.is_none())
        } else {
            parse_bool(v)
        }
    })?;
    Ok(SecuritySettings {
        credentials_file: props.parse_or_default("sasl.credentials.file", optional_path)?,
        acl_file,
        super_users: props.parse_or_default("super.users", parse_super_users)?,
        allow_everyone_if_no_acl_found: allow_everyone,
        replica_principals: props.parse_or_default("quorum.replica.principal", |v| {
            ReplicaPrincipals::parse(v.trim()).map_err(|e| e.to_string())
        })?,
        handshake_timeout_ms: props.parse_or_default("ssl.handshake.timeout.ms", parse_positive)?,
        failed_authentication_delay_ms: props
            .parse_or_default("connection.failed.authentication.delay.ms", parse_u64)?,
    })
}

/// `host:port`, with an IPv6 host in brackets.
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The entries of a comma-separated value, trimmed; empty entries (a trailing comma) are
/// skipped, as Kafka's list settings do.
fn list_entries(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn parse_host_ports(v: &str) -> Result<Vec<(String, u16)>, String> {
    list_entries(v).map(parse_host_port).collect()
}

fn parse_voters(v: &str) -> Result<Vec<VoterAddress>, String> {
    let mut voters: Vec<VoterAddress> = Vec::new();
    for entry in list_entries(v) {
        let (id, address) = entry
            .split_once('@')
            .ok_or(format!("`{entry}`: expected id@host:port"))?;
        let id = parse_node_id(id).map_err(|e| format!("`{entry}`: {e}"))?;
        let (host, port) = parse_host_port(address).map_err(|e| format!("`{entry}`: {e}"))?;
        if voters.iter().any(|v| v.id == id) {
            return Err(format!("voter {id} is listed twice"));
        }
        voters.push(VoterAddress { id, host, port });
    }
    Ok(voters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> BTreeMap<String, String> {
        [
            ("broker.id", "1"),
            ("cluster.id", "ringraft-test"),
            ("listeners", "PLAINTEXT://127.0.0.1:9093"),
            ("log.dirs", "/var/lib/ringraft"),
            (
                "quorum.voters",
                "1@127.0.0.1:9093,2@127.0.0.1:9094,3@localhost:9095",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// `map` with `key` set to `value`, or removed where `value` is None.
    fn changed(
        mut map: BTreeMap<String, String>,
        key: &str,
        value: Option<&str>,
    ) -> BTreeMap<String, String> {
        match value {
            Some(value) => map.insert(key.into(), value.into()),
            None => map.remove(key),
        };
        map
    }

    /// Asserts that `map` is refused with a message that contains `text`; the message.
    #[track_caller]
    fn assert_refused(map: &BTreeMap<String, String>, text: &str) -> String {
        let message = NodeConfig::from_map(map).unwrap_err().to_string();
        assert!(message.contains(text), "no {text:?} in: {message}");
        message
    }

    #[test]
    fn the_metrics_listener_and_log_format() {
        let config = NodeConfig::from_map(&base()).unwrap();
        assert_eq!(config.metrics_listener, None, "off by default");
        assert_eq!(config.log_format, LogFormat::Text);
        let mut map = base();
        map.insert("metrics.listener".into(), "http://127.0.0.1:9404".into());
        map.insert("log.format".into(), "JSON".into());
        let config = NodeConfig::from_map(&map).unwrap();
        assert_eq!(config.metrics_listener, Some(("127.0.0.1".into(), 9404)));
        assert_eq!(config.log_format, LogFormat::Json);
        for bad_value in [
            "127.0.0.1:9404",
            "https://127.0.0.1:9404",
            "http://127.0.0.1",
        ] {
            map.insert("metrics.listener".into(), bad_value.into());
            assert_refused(&map, "metrics.listener");
        }
        map.insert("metrics.listener".into(), "".into());
        map.insert("log.format".into(), "xml".into());
        assert_refused(&map, "expected text or json");
    }

    #[test]
    fn the_log_sync_mode() {
        use engine::io::{SyncMode, SyncModeSetting};
        let config = NodeConfig::from_map(&base()).unwrap();
        assert_eq!(config.log_sync_mode, SyncModeSetting::Auto, "the default");
        let mut map = base();
        for (value, mode) in [
            ("dsync", SyncModeSetting::Fixed(SyncMode::RwfDsync)),
            (" DSYNC ", SyncModeSetting::Fixed(SyncMode::RwfDsync)),
            (
                "fdatasync",
                SyncModeSetting::Fixed(SyncMode::LinkedFdatasync),
            ),
            ("Auto", SyncModeSetting::Auto),
        ] {
            map.insert("log.sync.mode".into(), value.into());
            assert_eq!(NodeConfig::from_map(&map).unwrap().log_sync_mode, mode);
        }
        map.insert("log.sync.mode".into(), "none".into());
        assert_refused(&map, "expected auto, fdatasync or dsync");
    }

    #[test]
    fn minimal_config_gets_kafkas_defaults() {
        let config = NodeConfig::from_map(&base()).unwrap();
        assert_eq!(config.broker_id, 1);
        assert_eq!(config.listener, ("127.0.0.1".to_owned(), 9093));
        assert_eq!(config.voters.len(), 3);
        assert_eq!(config.voters[2].to_string(), "3@localhost:9095");
        assert!(config.is_voter());
        let raft = config.raft_config(7);
        assert_eq!(raft.voters, vec![1, 2, 3]);
        assert_eq!(
            (raft.fetch_timeout_ms, raft.election_timeout_ms),
            (2000, 1000)
        );
        assert_eq!(
            (raft.retry_backoff_ms, raft.retry_backoff_max_ms),
            (20, 1000)
        );
        assert_eq!(config.raft_cpu, None);
        assert!(
            config.pre_vote && raft.pre_vote,
            "pre-vote is on by default"
        );
    }

    /// `max.connections`: 1024 on every listener by default, set for all or for one listener
    /// (which wins), never 0.
    #[test]
    fn max_connections_per_listener() {
        let mut two = base();
        for (key, value) in [
            (
                "listeners",
                "CLIENT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093",
            ),
            (
                "listener.security.protocol.map",
                "CLIENT:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            ),
            ("controller.listener.names", "PLAINTEXT"),
        ] {
            two = changed(two, key, Some(value));
        }
        let limits = |map: &BTreeMap<String, String>| {
            let config = NodeConfig::from_map(map).unwrap();
            let all = &config.listeners.all;
            all.iter().map(|l| l.max_connections).collect::<Vec<_>>()
        };
        assert_eq!(limits(&two), [1024, 1024]);
        let all = changed(two, "max.connections", Some("50"));
        assert_eq!(limits(&all), [50, 50]);
        let one = changed(all, "listener.name.plaintext.max.connections", Some("7"));
        assert_eq!(limits(&one), [50, 7]);
        assert_refused(
            &changed(
                one.clone(),
                "listener.name.client.max.connections",
                Some("0"),
            ),
            "listener.name.client.max.connections",
        );
        assert_refused(
            &changed(one, "max.connections", Some("-1")),
            "max.connections",
        );
    }

    /// `max.connections.per.ip`: Kafka's default, set for all or one listener, with overrides
    /// by IP address; 0 only with overrides; an entry that is not ADDRESS:N is refused.
    #[test]
    fn max_connections_per_ip_and_its_overrides() {
        use crate::transport::PerIpLimit;
        let limit = |map: &BTreeMap<String, String>| {
            let config = NodeConfig::from_map(map).unwrap();
            config.listeners.all[0].per_ip_limit.clone()
        };
        assert_eq!(
            limit(&base()),
            PerIpLimit {
                default: 2_147_483_647,
                overrides: Vec::new()
            }
        );
        let set = changed(base(), "max.connections.per.ip", Some("3"));
        let set = changed(
            set,
            "max.connections.per.ip.overrides",
            Some("10.0.0.1:0, [fd00::1]:5,::ffff:10.0.0.2:9"),
        );
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert_eq!(
            limit(&set),
            PerIpLimit {
                default: 3,
                overrides: vec![(ip("10.0.0.1"), 0), (ip("fd00::1"), 5), (ip("10.0.0.2"), 9)]
            }
        );
        let name = config_listener_name(&set);
        let one = changed(
            set.clone(),
            &format!("listener.name.{name}.max.connections.per.ip"),
            Some("0"),
        );
        assert_eq!(limit(&one).default, 0, "0 with overrides");
        assert_refused(
            &changed(base(), "max.connections.per.ip", Some("0")),
            "max.connections.per.ip",
        );
        for bad in ["10.0.0.1", "broker-1:4", "10.0.0.1:-1", "10.0.0.1:x"] {
            assert_refused(
                &changed(set.clone(), "max.connections.per.ip.overrides", Some(bad)),
                "max.connections.per.ip.overrides",
            );
        }
    }

    #[test]
    fn a_per_address_limit_below_the_voters_needs_is_warned_of() {
        let config = |value: &str| {
            let map = changed(base(), "max.connections.per.ip", Some(value));
            NodeConfig::from_map(&map).unwrap()
        };
        let voters = NodeConfig::from_map(&base()).unwrap().voters.len();
        assert!(config(&(2 * voters).to_string())
            .per_ip_limit_warning()
            .is_none());
        let warning = config(&(2 * voters - 1).to_string()).per_ip_limit_warning();
        assert!(
            warning.is_some_and(|w| w.contains("max.connections.per.ip")),
            "one below two per voter"
        );
        assert!(NodeConfig::from_map(&base())
            .unwrap()
            .per_ip_limit_warning()
            .is_none());
    }

    /// The lower-case name of the first listener of `map`.
    fn config_listener_name(map: &BTreeMap<String, String>) -> String {
        let config = NodeConfig::from_map(map).unwrap();
        config.listeners.all[0].name.to_ascii_lowercase()
    }

    /// The lease is on by default with a 10% drift bound; a config that breaks its
    /// inequalities is refused with one line naming the keys.
    #[test]
    fn lease_config_and_its_inequalities() {
        let config = NodeConfig::from_map(&base()).unwrap();
        let raft = config.raft_config(1);
        assert!(raft.lease && raft.lease_drift_percent == 10);
        assert_eq!(raft.lease_ms(), 1800);
        let mut map = base();
        map.insert("quorum.prevote.enable".into(), "false".into());
        let line = assert_refused(&map, "quorum.prevote.enable=true");
        assert!(
            line.contains("quorum.lease.enable") && !line.contains('\n'),
            "{line}"
        );
        map.insert("quorum.lease.enable".into(), "false".into());
        assert!(!NodeConfig::from_map(&map).unwrap().raft_config(1).lease);
        let mut map = base();
        map.insert("quorum.fetch.timeout.ms".into(), "1100".into());
        map.insert("quorum.lease.clock.drift.percent".into(), "10".into());
        assert_refused(&map, "quorum.lease.clock.drift.percent");
        map.insert("quorum.lease.clock.drift.percent".into(), "9".into());
        assert_eq!(
            NodeConfig::from_map(&map)
                .unwrap()
                .raft_config(1)
                .lease_ms(),
            1001
        );
        for bad in ["0", "51"] {
            map.insert("quorum.lease.clock.drift.percent".into(), bad.into());
            assert_refused(&map, "1 to 50");
        }
        map.insert("quorum.lease.clock.drift.percent".into(), "x".into());
        assert_refused(&map, "quorum.lease.clock.drift.percent");
    }

    #[test]
    fn pre_vote_can_be_turned_off() {
        let mut map = base();
        map.insert("quorum.prevote.enable".into(), "false".into());
        map.insert("quorum.lease.enable".into(), "false".into());
        let config = NodeConfig::from_map(&map).unwrap();
        assert!(!config.pre_vote && !config.raft_config(1).pre_vote);
        map.insert("quorum.prevote.enable".into(), "TRUE".into());
        assert!(NodeConfig::from_map(&map).unwrap().raft_config(1).pre_vote);
    }

    #[test]
    fn observer_pacing_reaches_the_core_at_10_ms_by_default() {
        let mut map = base();
        assert_eq!(
            NodeConfig::from_map(&map)
                .unwrap()
                .raft_config(1)
                .observer_fetch_interval_ms,
            10
        );
        map.insert("quorum.observer.fetch.interval.ms".into(), "0".into());
        let raft = NodeConfig::from_map(&map).unwrap().raft_config(1);
        assert_eq!(raft.observer_fetch_interval_ms, 0);
        map.insert("quorum.observer.fetch.interval.ms".into(), "-1".into());
        assert_refused(&map, "quorum.observer.fetch.interval.ms");
    }

    #[test]
    fn every_error_names_its_key() {
        let cases: &[(&str, &str, &str)] = &[
            ("broker.id", "-1", "broker.id"),
            ("quorum.fetch.timeout.ms", "0", "quorum.fetch.timeout.ms"),
            ("quorum.voters", "1@h:1,1@h:2", "quorum.voters"),
            ("quorum.voters", "x@h:1", "quorum.voters"),
            ("listeners", "SSL://h:1", "ssl.keystore.location"),
            ("listeners", "BAD NAME://h:1", "listeners"),
            ("listeners", "A://h:1,B://h:2", "controller.listener.names"),
            (
                "listeners",
                "SECRET://h:1",
                "listener.security.protocol.map",
            ),
            (
                "controller.listener.names",
                "OTHER",
                "controller.listener.names",
            ),
            ("ssl.client.auth", "sometimes", "ssl.client.auth"),
            (
                "quorum.replica.principal",
                "User:fixed",
                "quorum.replica.principal",
            ),
            (
                "allow.everyone.if.no.acl.found",
                "maybe",
                "allow.everyone.if.no.acl.found",
            ),
            (
                "listener.name.other.ssl.client.auth",
                "none",
                "listener.name.other",
            ),
            ("log.segment.bytes", "10", "log.segment.bytes"),
            ("raft.cpu", "zero", "raft.cpu"),
            ("quorum.prevote.enable", "yes", "quorum.prevote.enable"),
            (
                "quorum.retry.backoff.max.ms",
                "5",
                "quorum.retry.backoff.max.ms",
            ),
            ("quorum.fetch.timout.ms", "5", "quorum.fetch.timout.ms"),
        ];
        for (key, value, named) in cases {
            assert_refused(&changed(base(), key, Some(value)), named);
        }
        assert_refused(&changed(base(), "cluster.id", None), "cluster.id");
    }

    #[test]
    fn the_advertised_listener_defaults_to_the_listener_and_feeds_find_quorum() {
        let config = NodeConfig::from_map(&base()).unwrap();
        assert_eq!(config.advertised, ("127.0.0.1".to_owned(), 9093));
        let mut map = base();
        map.insert("listeners".into(), "PLAINTEXT://0.0.0.0:9093".into());
        map.insert(
            "advertised.listeners".into(),
            "PLAINTEXT://node1.example:9093".into(),
        );
        let config = NodeConfig::from_map(&map).unwrap();
        assert_eq!(config.listener, ("0.0.0.0".to_owned(), 9093));
        assert_eq!(config.advertised, ("node1.example".to_owned(), 9093));
        let raft = config.raft_config(1);
        assert_eq!((raft.host.as_str(), raft.port), ("node1.example", 9093));
        map.insert("advertised.listeners".into(), "[::1]:9193".into());
        let config = NodeConfig::from_map(&map).unwrap();
        assert_eq!(config.advertised, ("::1".to_owned(), 9193));
    }

    #[test]
    fn a_wildcard_listener_needs_an_advertised_listener_that_is_not_one() {
        for wildcard in [
            "PLAINTEXT://0.0.0.0:9093",
            "PLAINTEXT://[::]:9093",
            "[::]:9093",
        ] {
            let mut map = base();
            map.insert("listeners".into(), wildcard.into());
            let error = NodeConfig::from_map(&map).unwrap_err();
            assert!(
                matches!(error, ConfigError::WildcardWithoutAdvertised { .. }),
                "{wildcard}: {error}"
            );
            let message = error.to_string();
            assert!(message.contains("advertised.listeners"), "{message}");
        }
        for (value, reason) in [
            ("PLAINTEXT://0.0.0.0:9093", "wildcard"),
            ("PLAINTEXT://[::]:9093", "wildcard"),
            ("PLAINTEXT://h:0", "port 0"),
            ("SSL://h:9093", "not in `listeners`"),
            ("h:1,h:2", "named twice"),
        ] {
            let map = changed(base(), "advertised.listeners", Some(value));
            let message = assert_refused(&map, "`advertised.listeners`");
            assert!(message.contains(reason), "{value}: {message}");
        }
    }

    fn two_listeners() -> BTreeMap<String, String> {
        let mut map = base();
        for (k, v) in [
            (
                "listeners",
                "CLIENT://0.0.0.0:9092,CONTROLLER://127.0.0.1:9093",
            ),
            ("advertised.listeners", "CLIENT://node1.example:9092"),
            ("controller.listener.names", "controller"),
            (
                "listener.security.protocol.map",
                "CLIENT:SASL_SSL,CONTROLLER:SSL",
            ),
            ("ssl.keystore.location", "/etc/ringraft/node1.pem"),
            ("ssl.truststore.location", "/etc/ringraft/ca.pem"),
            ("listener.name.controller.ssl.client.auth", "required"),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512,PLAIN"),
            ("sasl.credentials.file", "/etc/ringraft/credentials.json"),
        ] {
            map.insert(k.into(), v.into());
        }
        map
    }

    #[test]
    fn kafkas_listener_names_protocols_and_per_listener_settings() {
        let config = NodeConfig::from_map(&two_listeners()).unwrap();
        let listeners = &config.listeners;
        assert_eq!(listeners.all.len(), 2);
        let (client, controller) = (&listeners.all[0], listeners.controller());
        assert_eq!(controller.name, "CONTROLLER");
        assert_eq!(controller.protocol, SecurityProtocol::Ssl);
        assert_eq!(config.listener, ("127.0.0.1".to_owned(), 9093));
        assert_eq!(
            config.advertised,
            ("127.0.0.1".to_owned(), 9093),
            "voters are told the controller listener"
        );
        let ssl = controller.ssl.as_ref().unwrap();
        assert_eq!(
            ssl.tls.client_auth,
            ClientAuth::Required,
            "the per-listener key"
        );
        assert_eq!(
            ssl.tls.truststore_location.as_deref(),
            Some(Path::new("/etc/ringraft/ca.pem"))
        );
        assert!(controller.sasl_mechanisms.is_empty());
        assert_eq!(client.protocol, SecurityProtocol::SaslSsl);
        assert_eq!(client.advertised, ("node1.example".to_owned(), 9092));
        assert_eq!(
            client.ssl.as_ref().unwrap().tls.client_auth,
            ClientAuth::None
        );
        assert_eq!(client.sasl_mechanisms, ["SCRAM-SHA-512", "PLAIN"]);
        assert!(listeners.serves_quorum(1) && !listeners.serves_quorum(0));
        assert!(listeners.serves_clients(0) && !listeners.serves_clients(1));
        assert!(
            !config.security.allow_everyone_if_no_acl_found || config.security.acl_file.is_none()
        );
        assert_eq!(
            config
                .security
                .replica_principals
                .replica_of(&KafkaPrincipal::user("ringraft-7")),
            Some(7)
        );
    }

    #[test]
    fn a_controller_listener_that_cannot_tell_voters_apart_is_refused() {
        for (key, value, refusal) in [
            (
                "listener.name.controller.ssl.client.auth",
                None,
                "must require client certificates",
            ),
            (
                "listener.security.protocol.map",
                Some("CLIENT:SASL_SSL,CONTROLLER:SASL_SSL"),
                "must be SSL",
            ),
            ("sasl.credentials.file", None, "sasl.credentials.file"),
            ("ssl.truststore.location", None, "ssl.truststore.location"),
            (
                "sasl.enabled.mechanisms",
                Some("GSSAPI"),
                "GSSAPI is not supported",
            ),
        ] {
            assert_refused(&changed(two_listeners(), key, value), refusal);
        }
    }

    #[test]
    fn one_plaintext_listener_serves_everything_and_allows_everyone() {
        let config = NodeConfig::from_map(&base()).unwrap();
        assert_eq!(config.listeners.all.len(), 1);
        assert_eq!(config.listeners.controller().name, "PLAINTEXT");
        assert!(config.listeners.serves_quorum(0) && config.listeners.serves_clients(0));
        assert!(config.security.allow_everyone_if_no_acl_found);
        let mut map = base();
        map.insert("authorizer.acl.file".into(), "/etc/ringraft/acls".into());
        let config = NodeConfig::from_map(&map).unwrap();
        assert!(
            !config.security.allow_everyone_if_no_acl_found,
            "with an ACL file, what no ACL allows is denied"
        );
    }

    #[test]
    fn file_and_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.properties");
        let text: String = base().iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        std::fs::write(&path, format!("# comment\n{text}")).unwrap();
        let config = NodeConfig::load(&path, &["broker.id=2".into(), "raft.cpu=1".into()]).unwrap();
        assert_eq!((config.broker_id, config.raft_cpu), (2, Some(1)));
        assert!(matches!(
            NodeConfig::load(&path, &["nokey".into()]),
            Err(ConfigError::BadOverride(_))
        ));
        assert!(matches!(
            NodeConfig::load(&dir.path().join("missing"), &[]),
            Err(ConfigError::Read { .. })
        ));
    }
}

#[cfg(test)]
mod docs_tests {
    /// docs/configuration.md documents every key with its default.
    #[test]
    fn configuration_doc_lists_every_key() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/configuration.md"
        ))
        .expect("docs/configuration.md exists");
        for (key, default, _) in super::KEYS {
            let row = doc
                .lines()
                .find(|line| line.starts_with(&format!("| `{key}` |")))
                .unwrap_or_else(|| panic!("docs/configuration.md has no row for {key}"));
            if let Some(default) = default.filter(|d| !d.is_empty()) {
                assert!(
                    row.contains(default),
                    "{key}: the doc's default is not {default}"
                );
            }
        }
    }
}
