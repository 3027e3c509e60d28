//! SASL listeners (docs/security.md, "SASL"): real `ringraft serve` processes on 127.0.0.1 with
//! a SASL client listener (`CLIENT`, SASL_SSL or SASL_PLAINTEXT) and a mutual-TLS controller
//! listener (`CONTROLLER`, certificates for `CN=ringraft-<id>` from the test's own CA), their
//! users in a credentials file written with `net::security::credentials`.
//!
//! What is checked: SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN logins, then acks=-1 Produce and
//! DescribeQuorum as the authenticated user, and the ACLs applied to that user; failed logins
//! answered SASL_AUTHENTICATION_FAILED and closed only after
//! `connection.failed.authentication.delay.ms`, nothing read meanwhile; requests before
//! authentication, and a plain-text client on the SASL_SSL port, closed; Kafka's legacy
//! framing after a v0 SaslHandshake; the credentials reloaded on SIGHUP (a bad file keeps the
//! old ones) and a missing file stopping the node at start-up. Every wait is bounded and every
//! process is killed when its guard drops.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::raft::{DescribeQuorumResponse, ErrorCode};
use net::client::{BlockingClient, ClientError};
use net::security::credentials::{CredentialStore, ScramMechanism};
use net::security::sasl::{Mechanism, SaslClient};
use net::security::tls::{client_config, TlsSettings};
use net::wire::kafka::{
    ILLEGAL_SASL_STATE, SASL_AUTHENTICATE, SASL_AUTHENTICATION_FAILED, SASL_HANDSHAKE,
    UNSUPPORTED_SASL_MECHANISM,
};
use support::*;
use testkit::certs::{Validity, CN_MAPPING_RULE};

const TIMEOUT: Duration = Duration::from_secs(5);
/// The fewest iterations a credential may have: quick logins for the tests.
const ITERATIONS: u32 = 4096;
/// Kafka's default `connection.failed.authentication.delay.ms`, which the nodes keep.
const FAILURE_DELAY: Duration = Duration::from_millis(100);
/// What a close "not before the delay" may come early by: the node starts the delay when it
/// answers, the test when it has read the answer.
const EARLY_SLACK: Duration = Duration::from_millis(30);

/// Every test's users, each with a SCRAM-SHA-512 and a SCRAM-SHA-256 credential.
const USERS: [(&str, &str); 3] = [
    ("alice", "alice-secret"),
    ("bob", "bob-secret"),
    ("carol", "carol-secret"),
];

const ALL_MECHANISMS: [Mechanism; 3] = [
    Mechanism::ScramSha512,
    Mechanism::ScramSha256,
    Mechanism::Plain,
];

fn add_users(path: &Path, users: &[(&str, &str)]) {
    let mut store = CredentialStore::load_or_empty(path).unwrap();
    for (user, password) in users {
        for mechanism in ScramMechanism::ALL {
            store
                .add_password(user, mechanism, password, ITERATIONS)
                .unwrap();
        }
    }
    store.save().unwrap();
}

struct Options {
    voters: usize,
    /// The client listener's protocol: "SASL_SSL" or "SASL_PLAINTEXT".
    protocol: &'static str,
    /// `sasl.enabled.mechanisms`.
    mechanisms: &'static str,
    /// The ACL file's text, if there is one.
    acls: Option<&'static str>,
}

struct SaslNode {
    id: i32,
    client: SocketAddr,
    config: PathBuf,
    stderr: PathBuf,
    process: Option<ProcessGuard>,
}

struct SaslCluster {
    // Before `root`: the processes go before their directories.
    nodes: Vec<SaslNode>,
    root: tempfile::TempDir,
    tls: Option<Arc<rustls::ClientConfig>>,
    credentials: PathBuf,
}

impl SaslCluster {
    /// Writes the configs, the certificates and the credentials file, and starts every node.
    fn start(options: &Options) -> SaslCluster {
        let (root, pki) = root_with_ca(".tmp-sasl");
        let credentials = root.path().join("credentials.json");
        add_users(&credentials, &USERS);
        let acl_line = options.acls.map(|acls| {
            let path = root.path().join("acls.txt");
            std::fs::write(&path, acls).unwrap();
            format!("authorizer.acl.file={}\n", path.display())
        });
        let count = options.voters;
        let ports = testkit::free_ports(2 * count).unwrap();
        let loopback = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let voters = (0..count)
            .map(|i| format!("{}@{}", i + 1, loopback(ports[count + i])))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        for i in 0..count {
            let id = i as i32 + 1;
            let (client, controller) = (loopback(ports[i]), loopback(ports[count + i]));
            let keystore = pki
                .issue(
                    &format!("node-{id}"),
                    &format!("ringraft-{id}"),
                    &["127.0.0.1", "localhost"],
                    Validity::Current,
                )
                .unwrap();
            let properties = format!(
                "broker.id={id}\n\
                 cluster.id={CLUSTER_ID}\n\
                 log.dirs={dir}\n\
                 log.segment.bytes={SEGMENT_BYTES}\n\
                 quorum.voters={voters}\n\
                 listeners=CLIENT://{client},CONTROLLER://{controller}\n\
                 listener.security.protocol.map=CLIENT:{protocol},CONTROLLER:SSL\n\
                 controller.listener.names=CONTROLLER\n\
                 ssl.keystore.location={keystore}\n\
                 ssl.truststore.location={truststore}\n\
                 listener.name.controller.ssl.client.auth=required\n\
                 ssl.principal.mapping.rules={CN_MAPPING_RULE}\n\
                 sasl.enabled.mechanisms={mechanisms}\n\
                 sasl.credentials.file={credentials}\n\
                 {acls}",
                dir = root.path().join(format!("node-{id}")).display(),
                protocol = options.protocol,
                keystore = keystore.display(),
                truststore = pki.ca_path().display(),
                mechanisms = options.mechanisms,
                credentials = credentials.display(),
                acls = acl_line.as_deref().unwrap_or(""),
            );
            let config = root.path().join(format!("server-{id}.properties"));
            std::fs::write(&config, properties).unwrap();
            nodes.push(SaslNode {
                id,
                client,
                config,
                stderr: root.path().join(format!("node-{id}.stderr")),
                process: None,
            });
        }
        let tls = (options.protocol == "SASL_SSL").then(|| {
            client_config(&TlsSettings {
                truststore_location: Some(pki.ca_path()),
                ..TlsSettings::default()
            })
            .unwrap()
        });
        let mut cluster = SaslCluster {
            nodes,
            root,
            tls,
            credentials,
        };
        for node in &mut cluster.nodes {
            node.process = Some(spawn_logged(&node.config, &[], &node.stderr));
        }
        cluster
    }

    /// A connection to `addr` as the client listener wants it (TLS or not), not authenticated.
    fn connect(&self, addr: SocketAddr) -> Result<BlockingClient, ClientError> {
        match &self.tls {
            Some(tls) => BlockingClient::connect_tls(addr, TIMEOUT, tls.clone(), "127.0.0.1"),
            None => BlockingClient::connect(addr, TIMEOUT),
        }
    }

    /// A connection to `addr` authenticated as `user`.
    fn login(
        &self,
        addr: SocketAddr,
        mechanism: Mechanism,
        user: &str,
        password: &str,
    ) -> Result<BlockingClient, ClientError> {
        let mut client = self.connect(addr)?;
        client.authenticate(mechanism, user, password)?;
        Ok(client)
    }

    /// DescribeQuorum on `addr` as `user` (SCRAM-SHA-256).
    fn describe_as(&self, addr: SocketAddr, user: (&str, &str)) -> Option<DescribeQuorumResponse> {
        let mut client = self
            .login(addr, Mechanism::ScramSha256, user.0, user.1)
            .ok()?;
        client.describe_quorum().ok().filter(|d| d.error.is_none())
    }

    /// One voter with `protocol` and `mechanisms` and no ACL file, started, and its client
    /// address once it leads (asked as alice).
    fn start_one(protocol: &'static str, mechanisms: &'static str) -> (SaslCluster, SocketAddr) {
        let cluster = SaslCluster::start(&Options {
            voters: 1,
            protocol,
            mechanisms,
            acls: None,
        });
        let (_, addr) = cluster.wait_for_leader(USERS[0]);
        (cluster, addr)
    }

    /// The leader's id and client address, asked of every node as `user` (bounded).
    fn wait_for_leader(&self, user: (&str, &str)) -> (i32, SocketAddr) {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            for node in &self.nodes {
                if self
                    .describe_as(node.client, user)
                    .is_some_and(|d| d.leader_id == node.id)
                {
                    return (node.id, node.client);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no leader within {WAIT:?}\n{}", self.tails());
    }

    fn tails(&self) -> String {
        testkit::stderr_tails(self.nodes.iter().map(|n| (n.id, n.stderr.as_path())))
    }
}

/// `token` as one size-prefixed frame (the legacy framing).
fn raw_frame(token: &[u8]) -> Vec<u8> {
    let mut frame = (token.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(token);
    frame
}

/// The error code of a refused authentication.
fn refusal(result: Result<(), ClientError>) -> (ErrorCode, String) {
    match result {
        Err(ClientError::Authentication { error, message, .. }) => (error, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// [`produce_one`] to a leader that DescribeQuorum names, which answers clients only a moment
/// later (once its high watermark is known in its epoch and its lease runs:
/// docs/consistency.md): NOT_LEADER_OR_FOLLOWER until then, asked again (bounded).
fn produce_once_leading(client: &mut BlockingClient, value: &str) -> Result<i64, String> {
    let deadline = Instant::now() + WAIT;
    loop {
        match produce_one(client, value) {
            Err(e) if e.contains("NOT_LEADER_OR_FOLLOWER") && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// The first partition's error of a Produce answer.
fn produce_error(client: &mut BlockingClient, value: &str) -> ErrorCode {
    let response = client.produce(9, -1, batch(value)).unwrap().unwrap();
    response.topics[0].partitions[0].error
}

/// Waits for `client`'s connection to be closed by the node, with a request on it that must
/// get no answer: the time that took. Panics if an answer comes.
fn closed_without_answer(client: &mut BlockingClient) -> Duration {
    let started = Instant::now();
    match client.api_versions(0) {
        Err(ClientError::Io { .. }) => {}
        other => panic!("expected the connection to close, got {other:?}"),
    }
    let waited = started.elapsed();
    assert!(
        waited < TIMEOUT - Duration::from_secs(1),
        "closed, not timed out"
    );
    waited
}

#[test]
fn three_voters_with_acls_serve_scram_and_plain_users_over_sasl_ssl() {
    let cluster = SaslCluster::start(&Options {
        voters: 3,
        protocol: "SASL_SSL",
        mechanisms: "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        // No ACL for the voters' own principals: their quorum RPCs need none.
        acls: Some(
            "allow User:alice WRITE topic:__cluster_metadata from *\n\
             allow User:alice DESCRIBE cluster:kafka-cluster from *\n\
             allow User:bob DESCRIBE cluster:kafka-cluster from *\n",
        ),
    });
    let bob = USERS[1];
    let (leader, leader_addr) = cluster.wait_for_leader(bob);

    let (alice, alice_password) = USERS[0];
    let mut last_offset = -1;
    for mechanism in ALL_MECHANISMS {
        let mut client = cluster
            .login(leader_addr, mechanism, alice, alice_password)
            .unwrap_or_else(|e| panic!("{mechanism}: {e}\n{}", cluster.tails()));
        let offset = produce_once_leading(&mut client, &format!("alice-{mechanism}"))
            .unwrap_or_else(|e| panic!("{mechanism}: produce: {e}"));
        assert!(offset > last_offset, "{mechanism}: offset {offset}");
        last_offset = offset;
        let described = client.describe_quorum().unwrap();
        assert!(described.error.is_none(), "{mechanism}: {described:?}");
        assert_eq!(described.leader_id, leader);
    }

    // bob may describe the cluster and nothing else.
    let mut client = cluster
        .login(leader_addr, Mechanism::ScramSha512, bob.0, bob.1)
        .unwrap();
    assert_eq!(
        produce_error(&mut client, "bob"),
        ErrorCode::TOPIC_AUTHORIZATION_FAILED
    );
    let described = client.describe_quorum().unwrap();
    assert!(described.error.is_none(), "{described:?}");

    // carol has no ACL at all.
    let (carol, carol_password) = USERS[2];
    let mut client = cluster
        .login(leader_addr, Mechanism::Plain, carol, carol_password)
        .unwrap();
    assert_eq!(
        client.describe_quorum().unwrap().error,
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED
    );
    assert_eq!(
        produce_error(&mut client, "carol"),
        ErrorCode::TOPIC_AUTHORIZATION_FAILED
    );

    // The admin tool over SASL_SSL: bob may describe the quorum, carol may not.
    let describe_as = |user: &str, password: &str| {
        let config = cluster.root.path().join(format!("{user}.properties"));
        std::fs::write(
            &config,
            format!(
                "security.protocol=SASL_SSL\nssl.truststore.location={}\n\
                 sasl.mechanism=SCRAM-SHA-512\nsasl.username={user}\nsasl.password={password}\n",
                cluster.root.path().join("pki").join("ca.pem").display()
            ),
        )
        .unwrap();
        std::process::Command::new(binary())
            .args(["quorum", "--describe", "--bootstrap-server"])
            .arg(format!("127.0.0.1:{}", leader_addr.port()))
            .arg("--command-config")
            .arg(&config)
            .output()
            .unwrap()
    };
    let described = describe_as(bob.0, bob.1);
    let stdout = String::from_utf8_lossy(&described.stdout);
    assert!(
        described.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&described.stderr)
    );
    assert!(stdout.contains(&format!("leader: {leader}")), "{stdout}");
    let refused = describe_as(carol, carol_password);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("CLUSTER_AUTHORIZATION_FAILED"), "{stderr}");
    let wrong = describe_as(bob.0, "not-the-password");
    assert!(!wrong.status.success());
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("SASL_AUTHENTICATION_FAILED"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );

    // The records reach every voter over the mutual-TLS controller listeners.
    let deadline = Instant::now() + WAIT;
    loop {
        let caught_up = cluster.describe_as(leader_addr, bob).is_some_and(|d| {
            d.current_voters
                .iter()
                .all(|v| v.log_end_offset > last_offset)
        });
        if caught_up {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the voters did not reach offset {}\n{}",
            last_offset + 1,
            cluster.tails()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn failed_logins_and_early_requests_are_closed_and_others_still_served() {
    let (cluster, addr) = SaslCluster::start_one("SASL_SSL", "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN");
    let alice = USERS[0];

    // Wrong passwords and unknown users: one answer for all, then the close after the delay,
    // and the request sent meanwhile is never answered.
    let attempts = [
        (Mechanism::ScramSha512, "alice", "wrong"),
        (Mechanism::ScramSha256, "mallory", "whatever"),
        (Mechanism::Plain, "alice", "wrong"),
        (Mechanism::Plain, "mallory", "whatever"),
    ];
    for (i, (mechanism, user, password)) in attempts.into_iter().enumerate() {
        let mut client = cluster.connect(addr).unwrap();
        let (error, message) = refusal(client.authenticate(mechanism, user, password));
        assert_eq!(error, SASL_AUTHENTICATION_FAILED, "{mechanism} {user}");
        assert_eq!(
            message,
            format!(
                "Authentication failed during authentication due to invalid credentials with \
                 SASL mechanism {mechanism}"
            )
        );
        let waited = closed_without_answer(&mut client);
        assert!(
            waited + EARLY_SLACK >= FAILURE_DELAY,
            "{mechanism} {user}: closed after {waited:?}"
        );
        // Others are still served.
        let mut other = cluster
            .login(addr, mechanism, alice.0, alice.1)
            .unwrap_or_else(|e| panic!("{e}\n{}", cluster.tails()));
        let produced = produce_one(&mut other, &format!("after-failure-{i}"));
        assert!(produced.is_ok(), "{produced:?}");
    }

    // A mechanism the listener does not enable: the list, then the close.
    let mut client = cluster.connect(addr).unwrap();
    let handshake = client.sasl_handshake(1, "GSSAPI").unwrap();
    assert_eq!(handshake.error, UNSUPPORTED_SASL_MECHANISM);
    assert_eq!(
        handshake.mechanisms,
        ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]
    );
    closed_without_answer(&mut client);

    // SaslAuthenticate before a handshake.
    let mut client = cluster.connect(addr).unwrap();
    let answer = client.sasl_authenticate(1, b"n,,n=alice,r=abc").unwrap();
    assert_eq!(answer.error, ILLEGAL_SASL_STATE);
    closed_without_answer(&mut client);

    // Before authentication: ApiVersions is answered (the SASL APIs among the listed ones),
    // anything else closes the connection.
    let mut client = cluster.connect(addr).unwrap();
    let versions = client.api_versions(3).unwrap();
    assert!(versions.error.is_none());
    for key in [SASL_HANDSHAKE, SASL_AUTHENTICATE, 0] {
        assert!(versions.api_keys.iter().any(|k| k.api_key == key), "{key}");
    }
    assert!(
        client.describe_quorum().is_err(),
        "DescribeQuorum before SASL"
    );
    let mut client = cluster.connect(addr).unwrap();
    assert!(
        client.produce(9, -1, batch("early")).is_err(),
        "Produce before SASL"
    );
    let mut client = cluster.connect(addr).unwrap();
    client.sasl_handshake(1, "SCRAM-SHA-512").unwrap();
    assert!(
        client.describe_quorum().is_err(),
        "DescribeQuorum mid-exchange"
    );

    // After authentication a second handshake is refused, and the connection stays.
    let mut client = cluster
        .login(addr, Mechanism::ScramSha512, alice.0, alice.1)
        .unwrap();
    let handshake = client.sasl_handshake(1, "SCRAM-SHA-512").unwrap();
    assert_eq!(handshake.error, ILLEGAL_SASL_STATE);
    let answer = client.sasl_authenticate(2, b"again").unwrap();
    assert_eq!(answer.error, ILLEGAL_SASL_STATE);
    assert!(client.describe_quorum().unwrap().error.is_none());

    // A plain-text client on the SASL_SSL port: closed; the node serves others.
    let mut plain = BlockingClient::connect(addr, TIMEOUT).unwrap();
    assert!(plain.api_versions(0).is_err(), "plain text on a TLS port");
    let mut other = cluster
        .login(addr, Mechanism::ScramSha256, alice.0, alice.1)
        .unwrap();
    assert!(produce_one(&mut other, "after-plain-text").is_ok());
}

#[test]
fn sasl_plaintext_legacy_framing_credential_reload_and_a_missing_file() {
    let (cluster, addr) = SaslCluster::start_one("SASL_PLAINTEXT", "SCRAM-SHA-256,PLAIN");
    let alice = USERS[0];

    // The legacy framing after a v0 handshake: raw tokens both ways, then Kafka requests.
    for mechanism in [Mechanism::ScramSha256, Mechanism::Plain] {
        let mut client = cluster.connect(addr).unwrap();
        let handshake = client.sasl_handshake(0, mechanism.name()).unwrap();
        assert!(handshake.error.is_none(), "{mechanism}: {handshake:?}");
        let mut sasl = SaslClient::new(mechanism, alice.0, alice.1).unwrap();
        let mut token = sasl.first_message();
        loop {
            client.write_raw(&raw_frame(&token)).unwrap();
            let answer = client.read_raw_frame().unwrap();
            match sasl.step(&answer).unwrap() {
                Some(next) => token = next,
                None => break,
            }
        }
        assert!(client.describe_quorum().unwrap().error.is_none());
        assert!(produce_one(&mut client, &format!("legacy-{mechanism}")).is_ok());
    }
    // A failure in the legacy framing has no answer: the connection closes after the delay.
    let mut client = cluster.connect(addr).unwrap();
    client.sasl_handshake(0, "PLAIN").unwrap();
    let sasl = SaslClient::new(Mechanism::Plain, alice.0, "wrong").unwrap();
    let started = Instant::now();
    client.write_raw(&raw_frame(&sasl.first_message())).unwrap();
    assert!(client.read_raw_frame().is_err(), "no answer to a failure");
    assert!(started.elapsed() + EARLY_SLACK >= FAILURE_DELAY);

    // SIGHUP reloads the credentials file: a new user can log in.
    let dave = ("dave", "dave-secret");
    assert!(cluster
        .login(addr, Mechanism::ScramSha256, dave.0, dave.1)
        .is_err());
    add_users(&cluster.credentials, &[dave]);
    let node = cluster.nodes[0].process.as_ref().unwrap();
    node.signal(libc::SIGHUP);
    let deadline = Instant::now() + WAIT;
    while cluster
        .login(addr, Mechanism::ScramSha256, dave.0, dave.1)
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "dave never got in\n{}",
            cluster.tails()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A file that no longer loads keeps the credentials in force.
    std::fs::write(&cluster.credentials, "not json").unwrap();
    node.signal(libc::SIGHUP);
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&cluster.nodes[0].stderr)
        .unwrap_or_default()
        .contains("the credentials file did not load")
    {
        assert!(
            Instant::now() < deadline,
            "no reload error\n{}",
            cluster.tails()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut client = cluster
        .login(addr, Mechanism::Plain, dave.0, dave.1)
        .unwrap();
    assert!(produce_one(&mut client, "dave").is_ok());

    // A node whose credentials file is missing does not start, and says which file.
    let missing = cluster.root.path().join("missing.json");
    let other_dir = cluster.root.path().join("other-node");
    let stderr = cluster.root.path().join("other-node.stderr");
    let credentials = format!("sasl.credentials.file={}", missing.display());
    let log_dirs = format!("log.dirs={}", other_dir.display());
    let mut other = spawn_logged(
        &cluster.nodes[0].config,
        &[&credentials, &log_dirs],
        &stderr,
    );
    let status = other.wait_exit(WAIT).expect("the node stops at once");
    assert!(!status.success());
    let text = std::fs::read_to_string(&stderr).unwrap();
    assert!(
        text.contains(&missing.display().to_string()),
        "the error names the file: {text}"
    );
}
