//! Real Kafka clients against a secured cluster (docs/security.md, "A secured 3-node cluster"):
//! three voters with mutual TLS between them on a CONTROLLER listener, a SASL_SSL listener
//! (SCRAM-SHA-512) and an SSL listener that requires client certificates (`MTLS`), the users
//! made with `ringraft credentials add`, and ACLs: `producer` and the certificate principal
//! `cert-producer` may WRITE, `consumer` and `cert-consumer` may only READ, `admin` is a super
//! user.
//!
//! What is checked, with kcat (librdkafka 2.0) and kafka-python 3: over SASL_SSL and over SSL
//! with client certificates, records produced with acks=all are consumed from the beginning
//! once each, at their offsets, in order; and each of these is refused the way the client
//! reports it, and followed by a good client served by the same node: a wrong password and an
//! unknown user (SASL_AUTHENTICATION_FAILED), a certificate from another CA and an expired one
//! (the handshake fails), no certificate, a plain-text client on a TLS port, and a user without
//! WRITE producing (TOPIC_AUTHORIZATION_FAILED). At the end every voter's log holds exactly the
//! records that were acknowledged, in order, and nothing a refused client sent.
//!
//! The clients come from `.ci/install-clients.sh`; a missing one fails the test. Every client
//! run is bounded (`timeout`, and the script's own limits); every node is killed when its guard
//! drops.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use net::client::BlockingClient;
use net::security::sasl::Mechanism;
use net::security::tls::{client_config, TlsSettings};
use serde_json::{json, Value};
use support::clients::{
    kcat, kcat_consume_args, kcat_produce_args, run_bounded, script, venv_python,
};
use support::*;
use testkit::certs::{Authority, Validity, CN_MAPPING_RULE};

const TIMEOUT: Duration = Duration::from_secs(5);
/// A client run is killed after this; the clients' own timeouts end them well before.
const CLIENT_LIMIT: Duration = Duration::from_secs(40);

/// The SASL users and their passwords (SCRAM-SHA-512 credentials).
const PRODUCER: (&str, &str) = ("producer", "producer-secret");
const CONSUMER: (&str, &str) = ("consumer", "consumer-secret");
const ADMIN: (&str, &str) = ("admin", "admin-secret");

/// docs/security.md's ACL file for this cluster.
const ACLS: &str = "\
allow User:producer WRITE topic:__cluster_metadata from *
allow User:consumer READ topic:__cluster_metadata from *
allow User:cert-producer WRITE topic:__cluster_metadata from *
allow User:cert-consumer READ topic:__cluster_metadata from *
";

struct SecuredNode {
    id: i32,
    /// The SASL_SSL listener (`CLIENT`).
    sasl: SocketAddr,
    /// The SSL listener that requires client certificates (`MTLS`).
    mtls: SocketAddr,
    dir: PathBuf,
    stderr: PathBuf,
    process: Option<ProcessGuard>,
}

/// A client certificate as openssl would leave it: the key and the certificate in two files.
struct ClientCert {
    key: PathBuf,
    crt: PathBuf,
}

struct SecuredCluster {
    // Before `root`: the processes go before their directories.
    nodes: Vec<SecuredNode>,
    root: tempfile::TempDir,
    ca: PathBuf,
    tls: Arc<rustls::ClientConfig>,
}

/// Splits a test-kit keystore (key, then certificate) into `stem.key` and `stem.crt`.
fn split_keystore(keystore: &Path) -> ClientCert {
    let text = std::fs::read_to_string(keystore).unwrap();
    let at = text.find("-----BEGIN CERTIFICATE-----").unwrap();
    let cert = ClientCert {
        key: keystore.with_extension("key"),
        crt: keystore.with_extension("crt"),
    };
    std::fs::write(&cert.key, &text[..at]).unwrap();
    std::fs::write(&cert.crt, &text[at..]).unwrap();
    cert
}

impl SecuredCluster {
    /// Writes the certificates, the credentials (with the CLI, as the doc does), the ACLs and
    /// the configs, and starts the three voters.
    fn start() -> SecuredCluster {
        let (root, pki) = root_with_ca(".tmp-secure");
        let credentials = root.path().join("credentials.json");
        for (user, password) in [PRODUCER, CONSUMER, ADMIN] {
            let password_file = root.path().join(format!("{user}.password"));
            std::fs::write(&password_file, format!("{password}\n")).unwrap();
            let added = Command::new(binary())
                .args(["credentials", "add", "--file"])
                .arg(&credentials)
                .args([
                    "--user",
                    user,
                    "--mechanism",
                    "SCRAM-SHA-512",
                    "--password-file",
                ])
                .arg(&password_file)
                .output()
                .unwrap();
            assert!(added.status.success(), "{added:?}");
        }
        let acls = root.path().join("acls");
        std::fs::write(&acls, ACLS).unwrap();

        let ports = testkit::free_ports(9).unwrap();
        let loopback = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let voters = (0..3)
            .map(|i| format!("{}@{}", i + 1, loopback(ports[6 + i])))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        for i in 0..3 {
            let id = i as i32 + 1;
            let (sasl, mtls, controller) = (
                loopback(ports[i]),
                loopback(ports[3 + i]),
                loopback(ports[6 + i]),
            );
            let keystore = pki
                .issue(
                    &format!("node-{id}"),
                    &format!("ringraft-{id}"),
                    &["127.0.0.1"],
                    Validity::Current,
                )
                .unwrap();
            let dir = root.path().join(format!("node-{id}"));
            // docs/security.md's server-1.properties on 127.0.0.1 (no advertised.listeners:
            // nothing binds a wildcard), with small segments for the tests.
            let properties = format!(
                "broker.id={id}\n\
                 cluster.id={CLUSTER_ID}\n\
                 log.dirs={dir}\n\
                 log.segment.bytes={SEGMENT_BYTES}\n\
                 listeners=CLIENT://{sasl},MTLS://{mtls},CONTROLLER://{controller}\n\
                 listener.security.protocol.map=CLIENT:SASL_SSL,MTLS:SSL,CONTROLLER:SSL\n\
                 controller.listener.names=CONTROLLER\n\
                 quorum.voters={voters}\n\
                 ssl.keystore.location={keystore}\n\
                 ssl.truststore.location={ca}\n\
                 listener.name.controller.ssl.client.auth=required\n\
                 listener.name.mtls.ssl.client.auth=required\n\
                 ssl.principal.mapping.rules={CN_MAPPING_RULE}\n\
                 sasl.enabled.mechanisms=SCRAM-SHA-512\n\
                 sasl.credentials.file={credentials}\n\
                 authorizer.acl.file={acls}\n\
                 super.users=User:admin\n",
                dir = dir.display(),
                keystore = keystore.display(),
                ca = pki.ca_path().display(),
                credentials = credentials.display(),
                acls = acls.display(),
            );
            let config = root.path().join(format!("server-{id}.properties"));
            std::fs::write(&config, properties).unwrap();
            let stderr = root.path().join(format!("node-{id}.stderr"));
            let process = spawn_logged(&config, &[], &stderr);
            nodes.push(SecuredNode {
                id,
                sasl,
                mtls,
                dir,
                stderr,
                process: Some(process),
            });
        }
        // The client certificates: the cluster's CA for the two principals, an expired one,
        // and one from a CA the nodes do not trust (its subject a trusted principal's).
        for (stem, name, validity) in [
            ("cert-producer", "cert-producer", Validity::Current),
            ("cert-consumer", "cert-consumer", Validity::Current),
            ("expired", "cert-producer", Validity::Expired),
        ] {
            split_keystore(&pki.issue(stem, name, &[], validity).unwrap());
        }
        let other = Authority::create(&root.path().join("other-pki"), "other-ca").unwrap();
        let stranger = other
            .issue("stranger", "cert-producer", &[], Validity::Current)
            .unwrap();
        split_keystore(&stranger);
        let tls = client_config(&TlsSettings {
            truststore_location: Some(pki.ca_path()),
            ..TlsSettings::default()
        })
        .unwrap();
        SecuredCluster {
            nodes,
            ca: pki.ca_path(),
            root,
            tls,
        }
    }

    /// A client certificate made by [`SecuredCluster::start`]: `cert-producer`,
    /// `cert-consumer`, `expired` or `stranger`.
    fn cert(&self, stem: &str) -> ClientCert {
        let dir = if stem == "stranger" {
            "other-pki"
        } else {
            "pki"
        };
        let base = self.root.path().join(dir).join(stem);
        ClientCert {
            key: base.with_extension("key"),
            crt: base.with_extension("crt"),
        }
    }

    /// The leader (asked of every node over SASL_SSL as `admin`, bounded).
    fn wait_for_leader(&self) -> &SecuredNode {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            for node in &self.nodes {
                let described =
                    BlockingClient::connect_tls(node.sasl, TIMEOUT, self.tls.clone(), "127.0.0.1")
                        .and_then(|mut client| {
                            client.authenticate(Mechanism::ScramSha512, ADMIN.0, ADMIN.1)?;
                            client.describe_quorum()
                        });
                if described.is_ok_and(|d| d.error.is_none() && d.leader_id == node.id) {
                    return node;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no leader within {WAIT:?}\n{}", self.tails());
    }

    fn tails(&self) -> String {
        testkit::stderr_tails(self.nodes.iter().map(|n| (n.id, n.stderr.as_path())))
    }

    /// Every node's address on one listener, comma-separated (a bootstrap list).
    fn servers(&self, listener: fn(&SecuredNode) -> SocketAddr) -> String {
        let addrs: Vec<String> = self.nodes.iter().map(|n| listener(n).to_string()).collect();
        addrs.join(",")
    }

    /// kcat's configuration file `stem.kcat.conf` for a SASL_SSL user (`kcat -F FILE`), as
    /// docs/security.md writes it.
    fn kcat_config(&self, stem: &str, (user, password): (&str, &str)) -> PathBuf {
        let path = self.root.path().join(format!("{stem}.kcat.conf"));
        std::fs::write(
            &path,
            format!(
                "security.protocol=SASL_SSL\n\
                 sasl.mechanisms=SCRAM-SHA-512\n\
                 sasl.username={user}\n\
                 sasl.password={password}\n\
                 ssl.ca.location={}\n",
                self.ca.display()
            ),
        )
        .unwrap();
        path
    }

    /// kcat's settings for the MTLS listener with `cert`.
    fn kcat_cert_args(&self, cert: &ClientCert) -> Vec<String> {
        [
            "security.protocol=ssl".to_string(),
            format!("ssl.ca.location={}", self.ca.display()),
            format!("ssl.certificate.location={}", cert.crt.display()),
            format!("ssl.key.location={}", cert.key.display()),
        ]
        .into_iter()
        .flat_map(|setting| ["-X".to_string(), setting])
        .collect()
    }

    /// kafka-python's settings for SASL_SSL as `user`.
    fn python_sasl(&self, (user, password): (&str, &str)) -> Value {
        json!({
            "security_protocol": "SASL_SSL",
            "ssl_cafile": self.ca,
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        })
    }

    /// kafka-python's settings for the MTLS listener with `cert`.
    fn python_cert(&self, cert: &ClientCert) -> Value {
        json!({
            "security_protocol": "SSL",
            "ssl_cafile": self.ca,
            "ssl_certfile": cert.crt,
            "ssl_keyfile": cert.key,
        })
    }

    /// Stops every node (SIGTERM, bounded) and checks each exited cleanly and that its log
    /// holds exactly `values`, in order, as its data records.
    fn stop_and_check_logs(&mut self, values: &[String]) {
        for node in &self.nodes {
            node.process.as_ref().unwrap().signal(libc::SIGTERM);
        }
        for node in &mut self.nodes {
            let status = node.process.as_mut().unwrap().wait_exit(STOP_WAIT);
            assert!(
                status.is_some_and(|s| s.success()),
                "node {}: {status:?}",
                node.id
            );
            node.process = None;
        }
        for node in &self.nodes {
            let log: Vec<String> = read_log(&node.dir).into_iter().map(|(_, v)| v).collect();
            assert_eq!(log, values, "node {}'s log", node.id);
        }
    }
}

/// What a kcat run printed, and whether it succeeded.
struct Kcat {
    success: bool,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Kcat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kcat {}:\n--- stdout\n{}--- stderr\n{}",
            if self.success { "succeeded" } else { "failed" },
            self.stdout,
            self.stderr
        )
    }
}

fn kcat_run(args: &[String], stdin: &str) -> Kcat {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let Output {
        status,
        stdout,
        stderr,
    } = run_bounded(&kcat(), &args, stdin.as_bytes(), CLIENT_LIMIT);
    Kcat {
        success: status.success(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// `kcat SECURITY -P -b SERVERS -t __cluster_metadata -p 0 -X acks=all` with `values`, a line
/// each.
fn kcat_produce(security: &[String], servers: &str, values: &[String]) -> Kcat {
    let mut args = security.to_vec();
    args.extend(kcat_produce_args(servers).into_iter().map(String::from));
    kcat_run(&args, &format!("{}\n", values.join("\n")))
}

/// `kcat SECURITY -C -b SERVERS -t __cluster_metadata -p 0 -o beginning -e -f '%o %s\n'`: the
/// partition from its start to its end, as (offset, value).
fn kcat_consume(security: &[String], servers: &str) -> Vec<(i64, String)> {
    let mut args = security.to_vec();
    args.extend(kcat_consume_args(servers).into_iter().map(String::from));
    let run = kcat_run(&args, "");
    assert!(run.success, "{run:?}");
    run.stdout
        .lines()
        .map(|line| {
            let (offset, value) = line.split_once(' ').unwrap_or_else(|| panic!("{run:?}"));
            (offset.parse().unwrap(), value.to_owned())
        })
        .collect()
}

fn sasl_args(config: &Path) -> Vec<String> {
    vec!["-F".into(), config.display().to_string()]
}

/// What a `secure_kafka_python.py` run reported.
#[derive(Debug, Default)]
struct Python {
    acked: Vec<(i64, String)>,
    failed: Vec<(String, String)>,
    consumed: Vec<(i64, String)>,
    logged: Vec<String>,
    exception: Option<String>,
    done: bool,
    stderr: String,
}

impl Python {
    /// Whether any error the client reported (logged, per record, or at start) contains `text`.
    fn reported(&self, text: &str) -> bool {
        self.logged
            .iter()
            .chain(self.failed.iter().map(|(_, e)| e))
            .chain(&self.exception)
            .any(|e| e.contains(text))
    }
}

fn kafka_python(mode: &str, servers: &str, count: usize, prefix: &str, config: &Value) -> Python {
    let path = script("secure_kafka_python.py");
    let count = count.to_string();
    let config = config.to_string();
    let args = [
        path.to_str().unwrap(),
        mode,
        servers,
        &count,
        prefix,
        &config,
    ];
    let out = run_bounded(&venv_python(), &args, b"", CLIENT_LIMIT);
    let mut run = Python {
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        ..Python::default()
    };
    let pair = |v: &Value| {
        (
            v[0].as_i64().unwrap_or(-1),
            v[1].as_str().unwrap_or_default().to_owned(),
        )
    };
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(a) = event.get("acked") {
            run.acked.push(pair(a));
        } else if let Some(c) = event.get("consumed") {
            run.consumed.push(pair(c));
        } else if let Some(f) = event.get("failed") {
            run.failed.push((text(&f[0]), text(&f[1])));
        } else if let Some(l) = event.get("logged") {
            run.logged.push(text(l));
        } else if let Some(e) = event.get("exception") {
            run.exception = Some(text(e));
        } else if event.get("done").is_some() {
            run.done = true;
        }
    }
    assert!(
        run.done,
        "the script did not finish ({}): {run:?}\n--- its stderr\n{}",
        out.status, run.stderr
    );
    run
}

/// Records `prefix-0..count` produced with kafka-python as `producer`, then consumed from the
/// beginning as `consumer`: every one acknowledged, and read once, at its offset, in order.
/// Returns the acknowledged values in offset order.
fn kafka_python_round_trip(
    servers: &str,
    count: usize,
    prefix: &str,
    producer: &Value,
    consumer: &Value,
) -> Vec<String> {
    let produced = kafka_python("produce", servers, count, prefix, producer);
    assert!(
        produced.failed.is_empty() && produced.exception.is_none(),
        "{produced:?}"
    );
    assert_eq!(produced.acked.len(), count, "{produced:?}");
    let consumed = kafka_python("consume", servers, count, prefix, consumer);
    assert!(consumed.exception.is_none(), "{consumed:?}");
    support::clients::assert_read_once_where_acked(&produced.acked, &consumed.consumed);
    let mut acked = produced.acked;
    acked.sort();
    acked.into_iter().map(|(_, v)| v).collect()
}

/// A good kcat producer on `server` after a refusal there: its record is acknowledged.
fn kcat_still_served(security: &[String], server: SocketAddr, value: &str, log: &mut Vec<String>) {
    let run = kcat_produce(security, &server.to_string(), &[value.to_string()]);
    assert!(
        run.success,
        "{value}: the node no longer serves kcat: {run:?}"
    );
    log.push(value.to_string());
}

/// A good kafka-python producer on `server` after a refusal there: its record is acknowledged.
fn python_still_served(config: &Value, server: SocketAddr, value: &str, log: &mut Vec<String>) {
    let run = kafka_python("produce", &server.to_string(), 1, value, config);
    assert_eq!(
        run.acked.len(),
        1,
        "{value}: the node no longer serves: {run:?}"
    );
    log.push(run.acked[0].1.clone());
}

/// A kafka-python producer refused: nothing acknowledged, and `error` among what it reported.
fn assert_python_refused(run: &Python, error: &str) {
    assert!(run.acked.is_empty(), "{run:?}");
    assert!(run.reported(error), "expected {error} in {run:?}");
}

/// The four clients of one secured listener, with the principals the ACL file gives them
/// (producer: WRITE; consumer: READ only), and the log of what was acknowledged through them.
struct Clients {
    kcat_producer: Vec<String>,
    kcat_consumer: Vec<String>,
    python_producer: Value,
    python_consumer: Value,
    leader: SocketAddr,
    servers: String,
    /// Every record acknowledged, in the order of the log.
    log: Vec<String>,
}

impl Clients {
    /// kcat: acks=all, then the partition from the beginning to its end: every line once, in
    /// order, and nothing else (the LeaderChange control batch is not a record); then
    /// kafka-python: every acknowledged record read once, at its offset.
    fn round_trips(&mut self, cluster: &SecuredCluster, prefix: &str) {
        let lines: Vec<String> = (0..50).map(|i| format!("{prefix}-kcat-{i}")).collect();
        let produced = kcat_produce(&self.kcat_producer, &self.servers, &lines);
        assert!(produced.success, "{produced:?}\n{}", cluster.tails());
        let read = kcat_consume(&self.kcat_consumer, &self.servers);
        let values: Vec<&String> = read.iter().map(|(_, v)| v).collect();
        assert_eq!(values, lines.iter().collect::<Vec<_>>());
        assert!(read.windows(2).all(|w| w[0].0 < w[1].0), "{read:?}");
        self.log.extend(lines);
        self.log.extend(kafka_python_round_trip(
            &self.servers,
            50,
            &format!("{prefix}-python"),
            &self.python_producer,
            &self.python_consumer,
        ));
    }

    /// After a refused client, a good one is still served by the same leader.
    fn kcat_still_served(&mut self, after: &str) {
        kcat_still_served(&self.kcat_producer, self.leader, after, &mut self.log);
    }

    fn python_still_served(&mut self, after: &str) {
        python_still_served(&self.python_producer, self.leader, after, &mut self.log);
    }

    /// What every secured listener refuses the same way: plain text on its TLS port, and a
    /// produce from the principal without WRITE (TOPIC_AUTHORIZATION_FAILED) from both clients.
    fn common_refusals(&mut self) {
        let server = self.leader.to_string();
        let refused_line = ["refused".to_string()];
        let run = kcat_produce(&[], &server, &refused_line);
        assert!(!run.success, "{run:?}");
        assert!(
            run.stderr.contains("connecting to a SSL listener?"),
            "{run:?}"
        );
        self.kcat_still_served("after-kcat-plain-text");

        let run = kcat_produce(&self.kcat_consumer, &server, &refused_line);
        assert!(!run.success, "{run:?}");
        assert!(
            run.stderr
                .contains("Delivery failed for message: Broker: Topic authorization failed"),
            "{run:?}"
        );
        self.kcat_still_served("after-kcat-no-write");
        let run = kafka_python("produce", &server, 1, "refused", &self.python_consumer);
        assert_eq!(run.failed.len(), 1, "{run:?}");
        assert_python_refused(&run, "TopicAuthorizationFailedError");
        self.python_still_served("after-python-no-write");
    }

    /// Everything acknowledged, once, in order, and nothing a refused client sent; then every
    /// voter's log is checked against it.
    fn read_back_and_stop(self, cluster: &mut SecuredCluster) {
        let read: Vec<String> = kcat_consume(&self.kcat_consumer, &self.servers)
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        assert_eq!(read, self.log);
        cluster.stop_and_check_logs(&self.log);
    }
}

#[test]
fn kcat_and_kafka_python_over_sasl_ssl_with_scram_sha_512() {
    let mut cluster = SecuredCluster::start();
    let mut clients = Clients {
        kcat_producer: sasl_args(&cluster.kcat_config("producer", PRODUCER)),
        kcat_consumer: sasl_args(&cluster.kcat_config("consumer", CONSUMER)),
        python_producer: cluster.python_sasl(PRODUCER),
        python_consumer: cluster.python_sasl(CONSUMER),
        leader: cluster.wait_for_leader().sasl,
        servers: cluster.servers(|n| n.sasl),
        log: Vec::new(),
    };
    clients.round_trips(&cluster, "sasl");

    // Refusals, each on the leader and followed by a good client there.
    let server = clients.leader.to_string();
    let refused_line = ["refused".to_string()];
    let kafkas_message = "Authentication failed during authentication due to invalid \
                          credentials with SASL mechanism SCRAM-SHA-512";
    for (case, user) in [
        ("wrong-password", (PRODUCER.0, "not-the-password")),
        ("unknown-user", ("mallory", "whatever")),
    ] {
        let config = cluster.kcat_config(case, user);
        let run = kcat_produce(&sasl_args(&config), &server, &refused_line);
        assert!(!run.success, "{case}: {run:?}");
        // librdkafka reports SASL_AUTHENTICATION_FAILED as its local "Authentication failure"
        // with the broker's message.
        assert!(
            run.stderr.contains("Local: Authentication failure"),
            "{case}: {run:?}"
        );
        assert!(
            run.stderr
                .contains(&format!("SASL authentication error: {kafkas_message}")),
            "{case}: {run:?}"
        );
        clients.kcat_still_served(&format!("after-kcat-{case}"));

        let run = kafka_python("produce", &server, 1, "refused", &cluster.python_sasl(user));
        assert_python_refused(&run, "[Error 58] SaslAuthenticationFailedError");
        assert_python_refused(&run, kafkas_message);
        clients.python_still_served(&format!("after-python-{case}"));
    }
    clients.common_refusals();
    clients.read_back_and_stop(&mut cluster);
}

#[test]
fn kcat_and_kafka_python_over_ssl_with_client_certificates() {
    let mut cluster = SecuredCluster::start();
    let (producer_cert, consumer_cert) =
        (cluster.cert("cert-producer"), cluster.cert("cert-consumer"));
    let mut clients = Clients {
        kcat_producer: cluster.kcat_cert_args(&producer_cert),
        kcat_consumer: cluster.kcat_cert_args(&consumer_cert),
        python_producer: cluster.python_cert(&producer_cert),
        python_consumer: cluster.python_cert(&consumer_cert),
        leader: cluster.wait_for_leader().mtls,
        servers: cluster.servers(|n| n.mtls),
        log: Vec::new(),
    };
    clients.round_trips(&cluster, "mtls");

    // Certificates the listener refuses: the handshake fails (rustls's alert, as each
    // client's TLS library names it).
    let server = clients.leader.to_string();
    let refused_line = ["refused".to_string()];
    for (stem, kcat_error, python_error) in [
        ("stranger", "alert unknown ca", "TLSV1_ALERT_UNKNOWN_CA"),
        (
            "expired",
            "alert certificate expired",
            "CERTIFICATE_EXPIRED",
        ),
    ] {
        let cert = cluster.cert(stem);
        let run = kcat_produce(&cluster.kcat_cert_args(&cert), &server, &refused_line);
        assert!(!run.success, "{stem}: {run:?}");
        assert!(run.stderr.contains(kcat_error), "{stem}: {run:?}");
        clients.kcat_still_served(&format!("after-kcat-{stem}"));

        let run = kafka_python(
            "produce",
            &server,
            1,
            "refused",
            &cluster.python_cert(&cert),
        );
        assert_python_refused(&run, python_error);
        clients.python_still_served(&format!("after-python-{stem}"));
    }
    // No certificate at all.
    let no_cert = [
        "-X".to_string(),
        "security.protocol=ssl".into(),
        "-X".into(),
        format!("ssl.ca.location={}", cluster.ca.display()),
    ];
    let run = kcat_produce(&no_cert, &server, &refused_line);
    assert!(!run.success, "{run:?}");
    assert!(run.stderr.contains("alert certificate required"), "{run:?}");
    clients.kcat_still_served("after-kcat-no-certificate");

    // Plain text on the TLS port; the principal comes from the certificate: cert-consumer may
    // not WRITE.
    clients.common_refusals();
    clients.read_back_and_stop(&mut cluster);
}
