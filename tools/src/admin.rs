//! The admin client behind `ringraft quorum`: it finds the leader itself and retries until a
//! deadline, as Kafka's admin client does (docs/operations.md, "The quorum tool").
//!
//! Any listed server is asked DescribeQuorum; the leader answers it, any other node answers
//! NOT_QUORUM_LEADER with the leader's id, and DescribeCluster on the same connection gives that
//! leader's client address. (FindQuorum, the draft's discovery RPC, is a quorum RPC: served on
//! the controller listener only, and to replicas with CLUSTER_ACTION, so an admin cannot count
//! on it.) No leader (an election), a node that does not answer, or a leader that moved are
//! retried with backoff up to the deadline; an authorization or authentication refusal ends
//! the command at once with the error's name.

use std::time::{Duration, Instant};

use engine::raft::{DescribeQuorumResponse, ErrorCode};
use net::client::{resolve, BlockingClient, ClientError};
use net::wire::kafka::DescribeClusterResponse;

use crate::client_config::ClientSettings;

/// The first pause between rounds over the servers; doubled each round up to [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Why an admin command failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The cluster refused this principal (or its login): retrying cannot help.
    #[error("{error}: {context}")]
    Refused { error: ErrorCode, context: String },
    /// No leader answered before the deadline: the last thing each attempt ran into.
    #[error("no leader answered within {waited:?} (last: {last})")]
    NoLeader { waited: Duration, last: String },
    /// An answer that retrying cannot change (a bad request, an unknown voter...).
    #[error("{0}")]
    Failed(String),
}

/// An error code that no retry can change for this principal.
pub fn is_refusal(error: ErrorCode) -> bool {
    [
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode::TOPIC_AUTHORIZATION_FAILED,
        ErrorCode::SASL_AUTHENTICATION_FAILED,
        ErrorCode::UNSUPPORTED_SASL_MECHANISM,
        ErrorCode::ILLEGAL_SASL_STATE,
    ]
    .contains(&error)
}

/// One attempt's failure: worth another round, or the end.
enum Attempt {
    Retry(String),
    Fatal(AdminError),
}

impl From<AdminError> for Attempt {
    fn from(error: AdminError) -> Self {
        Attempt::Fatal(error)
    }
}

/// A connection to the leader, with what it answered.
pub struct Leader {
    pub client: BlockingClient,
    /// `host:port` of the leader's client listener as it was reached.
    pub server: String,
    pub quorum: DescribeQuorumResponse,
    pub cluster_id: String,
}

pub struct Admin<'a> {
    servers: Vec<String>,
    settings: &'a ClientSettings,
    timeout: Duration,
}

impl<'a> Admin<'a> {
    /// An admin client over `servers` (`host:port[,host:port...]`), each command bounded by
    /// `timeout`.
    pub fn new(
        servers: &str,
        settings: &'a ClientSettings,
        timeout: Duration,
    ) -> Result<Self, AdminError> {
        let servers: Vec<String> = servers
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if servers.is_empty() {
            return Err(AdminError::Failed(
                "--bootstrap-server lists no server".into(),
            ));
        }
        Ok(Admin {
            servers,
            settings,
            timeout,
        })
    }

    /// Runs `step` against the leader until it returns Ok or a fatal error, retrying (with
    /// backoff, up to the deadline) whenever there is no leader or `step` asks to retry.
    pub fn with_leader<T>(
        &self,
        step: impl FnMut(&mut Leader) -> Result<T, Retryable>,
    ) -> Result<T, AdminError> {
        self.with_leader_until(self.deadline(), step)
    }

    /// When a command that starts now must have finished.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// [`Admin::with_leader`] up to `deadline` (a command of several steps shares one).
    pub fn with_leader_until<T>(
        &self,
        deadline: Instant,
        mut step: impl FnMut(&mut Leader) -> Result<T, Retryable>,
    ) -> Result<T, AdminError> {
        let started = Instant::now();
        let mut backoff = BACKOFF_FIRST;
        loop {
            let last = match self.find_leader() {
                Ok(mut leader) => match step(&mut leader) {
                    Ok(value) => return Ok(value),
                    Err(Retryable::Retry(why)) => why,
                    Err(Retryable::Fatal(error)) => return Err(error),
                },
                Err(Attempt::Retry(why)) => why,
                Err(Attempt::Fatal(error)) => return Err(error),
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(AdminError::NoLeader {
                    waited: now - started,
                    last,
                });
            }
            tracing::debug!("retrying in {backoff:?}: {last}");
            // The last round runs at the deadline.
            std::thread::sleep(backoff.min(deadline - now));
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// One round over the servers: the first that is, or names, a leader that answers.
    fn find_leader(&self) -> Result<Leader, Attempt> {
        let mut misses = Vec::new();
        for server in &self.servers {
            match self.via(server) {
                Ok(leader) => return Ok(leader),
                Err(Attempt::Retry(why)) => misses.push(why),
                Err(fatal) => return Err(fatal),
            }
        }
        Err(Attempt::Retry(misses.join("; ")))
    }

    /// The leader through `server`: itself, or the leader it names.
    fn via(&self, server: &str) -> Result<Leader, Attempt> {
        let mut client = self.connect(server)?;
        let quorum = described(&mut client, server)?;
        if quorum.error.is_none() {
            return self.leader(client, server, quorum);
        }
        if quorum.error != ErrorCode::NOT_QUORUM_LEADER || quorum.leader_id < 0 {
            return Err(Attempt::Retry(format!(
                "{server}: no leader ({}, epoch {})",
                quorum.error, quorum.leader_epoch
            )));
        }
        let hinted = self.leader_address(&mut client, server, quorum.leader_id)?;
        let mut client = self.connect(&hinted)?;
        let quorum = described(&mut client, &hinted)?;
        if quorum.error.is_none() {
            self.leader(client, &hinted, quorum)
        } else {
            Err(Attempt::Retry(format!(
                "{hinted} (named leader by {server}): {}",
                quorum.error
            )))
        }
    }

    fn leader(
        &self,
        mut client: BlockingClient,
        server: &str,
        quorum: DescribeQuorumResponse,
    ) -> Result<Leader, Attempt> {
        let cluster = describe_cluster(&mut client, server)?;
        Ok(Leader {
            client,
            server: server.to_owned(),
            quorum,
            cluster_id: cluster.cluster_id,
        })
    }

    /// `host:port` of node `leader_id`'s client listener, as `server` lists it.
    fn leader_address(
        &self,
        client: &mut BlockingClient,
        server: &str,
        leader_id: i32,
    ) -> Result<String, Attempt> {
        let cluster = describe_cluster(client, server)?;
        if !cluster.error.is_none() {
            return Err(Attempt::Retry(format!(
                "{server}: DescribeCluster: {}",
                cluster.error
            )));
        }
        cluster
            .brokers
            .iter()
            .find(|b| b.node_id == leader_id)
            .map(|b| format!("{}:{}", b.host, b.port))
            .ok_or_else(|| {
                Attempt::Retry(format!(
                    "{server} names node {leader_id} the leader but lists no address for it"
                ))
            })
    }

    fn connect(&self, server: &str) -> Result<BlockingClient, Attempt> {
        let addr = resolve(server).map_err(|e| Attempt::Retry(format!("{server}: {e}")))?;
        self.settings
            .connect(server, addr)
            .map_err(|e| client_failure(server, "connect", e))
    }
}

/// What a step against the leader asks for when it does not succeed.
pub enum Retryable {
    /// The leader moved, or the answer may change: find the leader again and repeat the step.
    Retry(String),
    Fatal(AdminError),
}

impl From<AdminError> for Retryable {
    fn from(error: AdminError) -> Self {
        Retryable::Fatal(error)
    }
}

/// Maps a client error: a SASL refusal is final, anything else (a node down, a closed
/// connection) is worth another round.
pub fn client_error(server: &str, what: &str, error: ClientError) -> Retryable {
    match error {
        ClientError::Authentication { error, message, .. } => {
            Retryable::Fatal(AdminError::Refused {
                error,
                context: format!("{server}: {what}: {message}"),
            })
        }
        ClientError::Sasl { source, .. } => Retryable::Fatal(AdminError::Refused {
            error: ErrorCode::SASL_AUTHENTICATION_FAILED,
            context: format!("{server}: {what}: {source}"),
        }),
        other => Retryable::Retry(format!("{server}: {what}: {other}")),
    }
}

/// `server`'s DescribeCluster answer; a refusal no retry can change ends the command.
fn describe_cluster(
    client: &mut BlockingClient,
    server: &str,
) -> Result<DescribeClusterResponse, Attempt> {
    let cluster = client
        .describe_cluster(1)
        .map_err(|e| client_failure(server, "DescribeCluster", e))?;
    refused(cluster.error, server, "DescribeCluster")?;
    Ok(cluster)
}

fn client_failure(server: &str, what: &str, error: ClientError) -> Attempt {
    match client_error(server, what, error) {
        Retryable::Retry(why) => Attempt::Retry(why),
        Retryable::Fatal(error) => Attempt::Fatal(error),
    }
}

/// Err(Refused) when `error` is an authorization or authentication refusal.
pub fn refused(error: ErrorCode, server: &str, api: &str) -> Result<(), AdminError> {
    if is_refusal(error) {
        Err(AdminError::Refused {
            error,
            context: format!("{api} refused by {server}"),
        })
    } else {
        Ok(())
    }
}

fn described(client: &mut BlockingClient, server: &str) -> Result<DescribeQuorumResponse, Attempt> {
    let quorum = client
        .describe_quorum()
        .map_err(|e| client_failure(server, "DescribeQuorum", e))?;
    refused(quorum.error, server, "DescribeQuorum")?;
    Ok(quorum)
}

impl From<AdminError> for crate::Failure {
    fn from(error: AdminError) -> Self {
        crate::Failure::Message(error.to_string())
    }
}
