//! Process tests of start-up: where a node listens and what it advertises (`listeners` on a
//! wildcard address with `advertised.listeners`), and the host checks that refuse to start with
//! one line naming the cause and the remedy: a log directory that refuses O_DIRECT (a ramfs
//! mounted in a private namespace with `unshare -rm`) and io_uring refused by a seccomp filter.
//! Real `ringraft serve` processes on 127.0.0.1 (see support/mod.rs); every wait is bounded and
//! every process is killed when its guard drops.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use engine::raft::{FindQuorumRequest, FindQuorumResponse, Request, Response};
use support::*;

const TIMEOUT: Duration = Duration::from_secs(10);

/// The non-empty lines of what `node` wrote to stderr; the node must have exited.
fn stderr_lines(node: &mut ProcessGuard) -> Vec<String> {
    read_stderr(node)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// Asks `addr` for its view of the quorum, as a node that is not a voter (replica id -1, no
/// endpoint of its own, so the answer is all it changes).
fn find_quorum(addr: SocketAddr) -> FindQuorumResponse {
    let request = Request::FindQuorum(FindQuorumRequest {
        cluster_id: CLUSTER_ID.into(),
        replica_id: -1,
        boot_timestamp: 0,
        host: String::new(),
        port: -1,
    });
    match send_raw_request(addr, &request, TIMEOUT).unwrap() {
        Response::FindQuorum(response) => response,
        other => panic!("FindQuorum answered with {other:?}"),
    }
}

#[test]
fn a_node_on_a_wildcard_address_advertises_its_advertised_listener_and_replicates() {
    let mut cluster = Cluster::new(3);
    let port = cluster.addr(3).port();
    cluster.start(1, &[]);
    cluster.start(2, &[]);
    let listeners = format!("listeners=PLAINTEXT://0.0.0.0:{port}");
    let advertised = format!("advertised.listeners=PLAINTEXT://127.0.0.1:{port}");
    cluster.start(3, &[&listeners, &advertised]);

    let leader = cluster.wait_for_leader(None);
    let mut client = cluster.connect(leader, TIMEOUT);
    let offset = produce_one(&mut client, "through-a-wildcard").expect("committed");
    cluster.wait_for_voters_at(leader, offset + 1);
    // Node 3 took part: its own log holds the record once the cluster has stopped.
    cluster.stop_all();
    assert!(
        read_log(&cluster.node(3).dir).contains(&(offset, "through-a-wildcard".to_owned())),
        "node 3 (on 0.0.0.0) replicated the record"
    );

    // Restarted alone, node 3 answers FindQuorum with its advertised endpoint for itself.
    cluster.start(3, &[&listeners, &advertised]);
    let deadline = std::time::Instant::now() + WAIT;
    let response = loop {
        match TcpStream::connect_timeout(&cluster.addr(3), Duration::from_secs(1)) {
            Ok(_) => break find_quorum(cluster.addr(3)),
            Err(error) if std::time::Instant::now() > deadline => {
                panic!("node 3 does not listen within {WAIT:?}: {error}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let own = response
        .voters
        .iter()
        .find(|v| v.voter_id == 3)
        .expect("voter 3 listed");
    assert_eq!(
        (own.host.as_str(), own.port),
        ("127.0.0.1", i32::from(port))
    );
    assert!(
        own.boot_timestamp > 0,
        "a running node's own boot timestamp"
    );
}

/// A node restarted at once after it exited finds its address still LISTENing for some
/// milliseconds, while the kernel tears down the old run's io_uring (docs/operations.md,
/// "Start-up errors"): it waits for the address instead of failing. Here the test holds the
/// address for 600 ms; the node is still running then, said why once, and serves once the
/// address is let go.
#[test]
fn a_node_whose_address_is_still_held_waits_for_it_and_then_serves() {
    let mut cluster = Cluster::new(1);
    let addr = cluster.addr(1);
    let holder = std::net::TcpListener::bind(addr).expect("the test holds the node's address");
    cluster.start(1, &[]);
    std::thread::sleep(Duration::from_millis(600));
    if let Err(exited) = cluster.check_running() {
        panic!("the node gave up while its address was held: {exited}");
    }
    drop(holder);
    let deadline = std::time::Instant::now() + WAIT;
    let response = loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(_) => break find_quorum(addr),
            Err(error) if std::time::Instant::now() > deadline => {
                panic!("node 1 does not listen within {WAIT:?}: {error}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    assert_eq!(response.error, engine::raft::ErrorCode::NONE);
    let stderr = std::fs::read_to_string(cluster.stderr_path(1)).unwrap();
    let waits: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("Address already in use") && line.contains("retrying"))
        .collect();
    assert_eq!(waits.len(), 1, "one warning for the wait:\n{stderr}");
    assert!(waits[0].contains(&addr.to_string()), "{}", waits[0]);
    cluster.stop_all_cleanly();
}

#[test]
fn a_wildcard_listener_without_advertised_listeners_refuses_to_start() {
    let mut cluster = Cluster::new(1);
    let port = cluster.addr(1).port();
    let config = cluster.node(1).config.clone();
    let listeners = format!("listeners=PLAINTEXT://0.0.0.0:{port}");
    let mut node = ProcessGuard {
        child: spawn(&config, &[&listeners], Stdio::piped()),
    };
    let status = node.wait_exit(TIMEOUT).expect("refused at once");
    assert!(!status.success(), "exited with {status}");
    let lines = stderr_lines(&mut node);
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    assert!(lines[0].contains("advertised.listeners"), "{}", lines[0]);
    assert!(lines[0].contains("0.0.0.0"), "{}", lines[0]);
}

#[test]
fn a_log_directory_that_refuses_o_direct_stops_the_node_with_one_line_naming_the_remedy() {
    // ramfs refuses O_DIRECT (EINVAL); the node runs in a private user and mount namespace
    // (`unshare -rm`) where the log directory's parent is a ramfs, so nothing is mounted for
    // anyone else and no privilege is needed.
    let cluster = Cluster::new(1);
    let ramfs = cluster.root.path().join("ramfs");
    std::fs::create_dir(&ramfs).unwrap();
    let log_dir = ramfs.join("log");
    let config = cluster.root.path().join("ramfs.properties");
    let addr = cluster.addr(1);
    let voters = format!("quorum.voters=1@{addr}");
    std::fs::write(
        &config,
        node_properties(1, CLUSTER_ID, addr, &log_dir, &voters),
    )
    .unwrap();
    let mut node = spawn_on_private_mount("-t ramfs none", &ramfs, &config, "", "warn");
    let status = node.wait_exit(TIMEOUT).expect("the node stops at once");
    let stderr = read_stderr(&mut node);
    assert!(
        !stderr.contains("mount:") && !stderr.contains("unshare:"),
        "could not mount a ramfs in a private namespace ({status}): {stderr}"
    );
    assert!(!status.success(), "exited with {status}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    let line = lines[0];
    for needed in [
        "O_DIRECT",
        "(ramfs)",
        &log_dir.display().to_string(),
        "put log.dirs on a local ext4 or xfs filesystem",
    ] {
        assert!(line.contains(needed), "no `{needed}` in: {line}");
    }
    eprintln!("{line}");
}

/// A seccomp filter that makes io_uring_setup fail with EPERM, as container runtimes' default
/// profiles do, and allows every other system call.
fn io_uring_blocking_filter() -> Vec<libc::sock_filter> {
    const LOAD_SYSCALL_NR: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS, offset 0 = seccomp_data.nr
    const JUMP_IF_EQUAL: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RETURN: u16 = 0x06; // BPF_RET | BPF_K
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    vec![
        op(LOAD_SYSCALL_NR, 0, 0, 0),
        op(JUMP_IF_EQUAL, 0, 1, libc::SYS_io_uring_setup as u32),
        op(RETURN, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        op(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

#[test]
fn io_uring_refused_by_seccomp_stops_the_node_with_one_line_naming_the_remedies() {
    let mut cluster = Cluster::new(1);
    let config = cluster.node(1).config.clone();
    let filter = io_uring_blocking_filter();
    let mut command = Command::new(binary());
    command
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec the closure only makes two prctl system calls on memory it
    // owns (`filter`); it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let program = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &program as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut node = ProcessGuard {
        child: command.spawn().expect("spawn under a seccomp filter"),
    };
    let status = node.wait_exit(TIMEOUT).expect("the node stops at once");
    assert!(!status.success(), "exited with {status}");
    let lines = stderr_lines(&mut node);
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    for needed in [
        "io_uring is unavailable",
        "seccomp",
        "io_uring_setup",
        "kernel.io_uring_disabled",
    ] {
        assert!(lines[0].contains(needed), "no `{needed}` in: {}", lines[0]);
    }
    eprintln!("{}", lines[0]);
}
