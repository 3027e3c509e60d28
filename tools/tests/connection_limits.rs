//! Connection limits are per listener (docs/operations.md, "Connection limits"): clients that
//! fill a node's client listener to its `max.connections` get no more connections there, and the
//! voters still reach the node's controller listener. Three voters with mutual-TLS controller
//! listeners and `max.connections=8`; one follower's client listener is filled, the third voter
//! is killed and the second restarted, so that every acks=-1 write needs the filled node and
//! connections to its controller listener made after the flood. Real `ringraft serve`
//! processes on 127.0.0.1; every wait is bounded and every process is killed when its guard
//! drops.

mod support;

use std::time::{Duration, Instant};

use net::client::BlockingClient;
use support::*;

const LIMIT: usize = 8;
const TIMEOUT: Duration = Duration::from_secs(5);

/// A client of `addr` that the node serves (an ApiVersions round trip), or why not.
fn served_client(addr: std::net::SocketAddr) -> Result<BlockingClient, String> {
    let mut client = BlockingClient::connect(addr, TIMEOUT).map_err(|e| e.to_string())?;
    client.api_versions(3).map_err(|e| e.to_string())?;
    Ok(client)
}

/// Whether node `id`, asked through `client`, answers DescribeQuorum as the leader.
fn leads(client: &mut BlockingClient, id: i32) -> bool {
    client
        .describe_quorum()
        .is_ok_and(|d| d.error.is_none() && d.leader_id == id)
}

#[test]
fn clients_that_fill_a_listener_do_not_shut_the_voters_out() {
    let limit = format!("max.connections={LIMIT}");
    let mut cluster = Cluster::new_mutual_tls(3);
    for id in 1..=3 {
        cluster.start(id, &[&limit]);
    }
    let leader = cluster.wait_for_leader(None);
    // Every voter up and fetching (its listeners open): two suffice for an election, and the
    // third may still be starting (CI of 664375b: connection refused at the filled node).
    cluster.wait_for_voters_at(leader, 1);
    let mut others = (1..=3).filter(|&id| id != leader);
    let (filled, restarted) = (others.next().unwrap(), others.next().unwrap());
    let killed = leader;

    // The filled node's client listener: LIMIT connections served, one more refused. The
    // first is kept to produce through, should the filled node lead later.
    let filled_addr = cluster.addr(filled);
    let mut clients: Vec<BlockingClient> = (0..LIMIT)
        .map(|i| served_client(filled_addr).unwrap_or_else(|e| panic!("client {i}: {e}")))
        .collect();
    assert!(
        served_client(filled_addr).is_err(),
        "connection {} of a listener with max.connections={LIMIT} is refused",
        LIMIT + 1
    );

    // Every write now needs the filled node and the restarted one, whose connections to each
    // other are all new: the filled node must accept them on its controller listener.
    cluster.node(killed).process.take(); // SIGKILL via the guard
    cluster.node(restarted).process.take();
    cluster.start(restarted, &[&limit]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let offset = loop {
        assert!(
            Instant::now() < deadline,
            "no acks=-1 write committed by nodes {filled} and {restarted}; node {filled}:\n{}",
            cluster.stderr_tail(filled)
        );
        // The filled node is asked through the connection kept for it (its listener takes no
        // new one), the restarted one through a new connection.
        let produced = if leads(&mut clients[0], filled) {
            produce_one(&mut clients[0], "after-the-flood")
        } else {
            served_client(cluster.addr(restarted)).and_then(|mut client| {
                if leads(&mut client, restarted) {
                    produce_one(&mut client, "after-the-flood")
                } else {
                    Err("no leader yet".into())
                }
            })
        };
        match produced {
            Ok(offset) => break offset,
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    // Acknowledged with one voter dead means durable on both: the record is in each log.
    for id in [filled, restarted] {
        let log = read_log(&log_dir(&cluster, id));
        assert!(
            log.iter()
                .any(|(o, v)| *o == offset && v == "after-the-flood"),
            "node {id} lacks the acknowledged record at {offset}"
        );
    }
    // The flood is still there, and still served.
    for (i, client) in clients.iter_mut().enumerate() {
        client
            .api_versions(3)
            .unwrap_or_else(|e| panic!("client {i} after the restart: {e}"));
    }
}

/// `max.connections.per.ip` and its overrides reach every listener of a running node: from
/// 127.0.0.2 (override 2) a third connection is refused, from 127.0.0.3 (override 0) any, while
/// 127.0.0.1 (default 16, the voters' own address on this single listener) is still served and
/// the cluster still commits; a connection closed makes room for one more.
#[test]
fn a_node_keeps_at_most_its_per_address_limit_from_one_address() {
    use std::net::Ipv4Addr;
    let per_ip = [
        "max.connections.per.ip=16",
        "max.connections.per.ip.overrides=127.0.0.2:2,127.0.0.3:0",
    ];
    let mut cluster = Cluster::new(3);
    for id in 1..=3 {
        cluster.start(id, &per_ip);
    }
    let leader = cluster.wait_for_leader(None);
    let addr = cluster.addr(leader);
    let served_from = |ip: Ipv4Addr| {
        let mut client =
            BlockingClient::connect_from(ip, addr, TIMEOUT).map_err(|e| e.to_string())?;
        client.api_versions(3).map_err(|e| e.to_string())?;
        Ok::<_, String>(client)
    };
    let two = Ipv4Addr::new(127, 0, 0, 2);
    let mut kept: Vec<BlockingClient> = (0..2)
        .map(|i| served_from(two).unwrap_or_else(|e| panic!("client {i} from {two}: {e}")))
        .collect();
    assert!(served_from(two).is_err(), "a third from {two} is refused");
    let blocked = Ipv4Addr::new(127, 0, 0, 3);
    assert!(served_from(blocked).is_err(), "none from {blocked}");
    // The voters' address keeps its own room: a client from it commits a write.
    let mut local = served_client(addr).expect("a client from 127.0.0.1");
    produce_one(&mut local, "per-ip").expect("an acks=-1 write commits");
    // One from 127.0.0.2 closes: one more may come, not two.
    drop(kept.pop());
    let deadline = Instant::now() + TIMEOUT;
    let again = loop {
        match served_from(two) {
            Ok(client) => break client,
            Err(e) => assert!(Instant::now() < deadline, "no room after a close: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(served_from(two).is_err(), "still two at most");
    kept.push(again);
    for (i, client) in kept.iter_mut().enumerate() {
        client
            .api_versions(3)
            .unwrap_or_else(|e| panic!("client {i} from {two}: {e}"));
    }
}
