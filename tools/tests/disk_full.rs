//! Process test of a full disk: the node must stop (fail-stop, exit code 74), not hang, even when
//! its stderr is unwritable too (logs on the same full disk). A one-voter node runs in a private
//! user and mount namespace (`unshare -rm`) with its log on a small tmpfs, 1 MiB segments and
//! stderr on /dev/full (every write fails with ENOSPC); Produce load runs until the segment roll
//! finds no space. Before the fix, the log thread panicked inside its own error report and the
//! raft thread waited forever for it. Every wait is bounded; the node is killed when its guard
//! drops.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use engine::record::RecordBatchBuilder;
use net::client::BlockingClient;
use support::*;

/// Long enough for the ~7 MB a 6 MiB tmpfs takes before it is full, on a slow machine.
const FILL_BUDGET: Duration = Duration::from_secs(60);

fn wait_listening(addr: SocketAddr, node: &mut ProcessGuard) {
    let deadline = Instant::now() + WAIT;
    while TcpStream::connect(addr).is_err() {
        if let Ok(Some(status)) = node.child.try_wait() {
            panic!("the node exited before listening: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the node never listened on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_full_disk_stops_the_node_with_the_storage_exit_code_even_when_stderr_is_unwritable() {
    let cluster = Cluster::new(1);
    let mount = cluster.root.path().join("small");
    std::fs::create_dir(&mount).unwrap();
    let config = cluster.root.path().join("small.properties");
    let addr = cluster.addr(1);
    let voters = format!("quorum.voters=1@{addr}");
    let properties = node_properties(1, CLUSTER_ID, addr, &mount.join("log"), &voters);
    std::fs::write(&config, properties + "log.segment.bytes=1048576\n").unwrap();
    let mut node = spawn_on_private_mount(
        "-t tmpfs -o size=6m none",
        &mount,
        &config,
        "2>/dev/full",
        "info",
    );
    wait_listening(cluster.addr(1), &mut node);

    // 64 KiB batches until the node stops answering (it exits and closes the connection).
    let value = vec![b'x'; 1024];
    let mut builder = RecordBatchBuilder::new(0, 0);
    for _ in 0..64 {
        builder.append(0, None, Some(&value), &[]);
    }
    let batch = builder.build().freeze();
    let mut client = BlockingClient::connect(cluster.addr(1), WAIT).expect("connect");
    let deadline = Instant::now() + FILL_BUDGET;
    let mut acknowledged = 0u64;
    let mut refused = 0u64;
    loop {
        match client.produce(9, -1, batch.clone()) {
            Ok(Some(response)) if response.topics[0].partitions[0].error.is_none() => {
                acknowledged += 1
            }
            // NOT_LEADER_OR_FOLLOWER while the single voter elects itself; anything else too.
            Ok(_) => refused += 1,
            Err(_) => break, // the connection closed: the node stopped
        }
        assert!(
            Instant::now() < deadline,
            "the node still answers after {FILL_BUDGET:?} ({acknowledged} batches acknowledged, \
             {refused} refused): 6 MiB should be full by now"
        );
        if refused > 0 && acknowledged == 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let status = node
        .wait_exit(WAIT)
        .expect("the node closed its connection but did not exit: it hangs instead of stopping");
    let stderr = read_stderr(&mut node);
    assert_eq!(
        status.code(),
        Some(74),
        "expected the storage fail-stop code 74, got {status} (stderr of the namespace: {stderr})"
    );
    assert!(
        acknowledged >= 16,
        "only {acknowledged} batches of 64 KiB were acknowledged before the disk was full"
    );
}
