//! A seeded nemesis: 3 voters, each in a network namespace of its own (testkit's netns lab, made
//! as root, as CI runs), on PLAINTEXT and again on mutual TLS, written to by 3 acks=-1 writers
//! while a random schedule of faults hits them: SIGKILL and restart, SIGSTOP and SIGCONT,
//! cutting a node off the network, and severing two nodes from each other alone (a partial
//! partition), on the leader or any node, one at a time or two at once (no majority then). At
//! the end every fault is undone and the history is checked against every voter's log (and, in
//! the run with voter changes, every observer's):
//! - every acknowledged record is in every log exactly once, at its acknowledged offset;
//! - one writer's records, each acknowledged before the next was sent, stand in that order;
//! - the voters' logs are the same, and no value stands twice in any of them;
//! - the cluster commits again once the faults are undone, and every node exits cleanly.
//!
//! `RINGRAFT_NEMESIS_SEED` replays a schedule's draws (the seed is printed first; real processes
//! keep their own timing, so "the leader" may be another node in the replay) and
//! `RINGRAFT_NEMESIS_SECONDS` lengthens it (default 30) for soak runs, e.g.
//! `RINGRAFT_NEMESIS_SECONDS=600 cargo test --release -p ringraft-tools --test nemesis`.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::sim::XorShift64;
use support::nemesis::*;
use support::*;

const WRITERS: usize = 3;
/// What the cluster must commit within [`WAIT`] once every fault is undone.
const RECORDS_AFTER_HEALING: usize = 50;

/// Each writer's acknowledged (offset, value), in the order they were acknowledged.
type History = Vec<Acked>;

/// Starts [`WRITERS`] writers ([`start_writer`]) in the lab's client namespace, writer n
/// producing `w{n}-{padding}{i}` and starting at node n's address.
fn start_writers(
    cluster: &Cluster,
    padding: &str,
    stop: &Arc<AtomicBool>,
) -> (History, Vec<std::thread::JoinHandle<()>>) {
    let host = cluster.lab.as_ref().unwrap().client().clone();
    let addrs: Vec<_> = cluster.nodes.iter().map(|n| n.addr).collect();
    (0..WRITERS)
        .map(|writer| {
            let prefix = format!("w{writer}-{padding}");
            start_writer(
                Some(host.clone()),
                addrs.clone(),
                writer,
                &prefix,
                Arc::clone(stop),
            )
        })
        .unzip()
}

fn acked_total(history: &History) -> usize {
    history.iter().map(|h| h.lock().unwrap().len()).sum()
}

/// Every node's client address, as `--bootstrap-server` takes them.
fn servers(cluster: &Cluster) -> String {
    let addrs: Vec<String> = cluster.nodes.iter().map(|n| n.addr.to_string()).collect();
    addrs.join(",")
}

/// `ringraft quorum --bootstrap-server <every node> --timeout-ms 5000 <args>` run in the lab's
/// client namespace, where the nodes' addresses are.
fn quorum_tool(host: &testkit::netns::Host, servers: &str, args: &[&str]) -> std::process::Output {
    host.command(std::path::Path::new(binary()))
        .args([
            "quorum",
            "--bootstrap-server",
            servers,
            "--timeout-ms",
            "5000",
        ])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// Sleeps for `pause`, or less once `stop` is set.
fn sleep_unless(stop: &AtomicBool, pause: Duration) {
    let until = Instant::now() + pause;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Until `stop`, asks every 1-3 s for a random voter set, three of the four nodes or (one time
/// in four) all of them, with `ringraft quorum reassign` ([`quorum_tool`]); each request
/// overwrites the last target, finished or not. Returns what each request answered, for the
/// report (under the faults many time out or find no leader, which is allowed), and how many
/// targets were recorded.
fn start_reassigner(
    cluster: &Cluster,
    seed: u64,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Vec<String>, usize)> {
    let servers = servers(cluster);
    let ids: Vec<i32> = cluster.nodes.iter().map(|n| n.id).collect();
    let host = cluster.lab.as_ref().unwrap().client().clone();
    let stop = Arc::clone(stop);
    std::thread::spawn(move || {
        // Its own stream, so the fault schedule stays the one the seed gives without it.
        let mut rng = XorShift64(seed.rotate_left(17) | 1);
        let started = Instant::now();
        let mut said = Vec::new();
        let mut recorded = 0;
        loop {
            let pause = millis_between(&mut rng, 1_000, 3_000);
            sleep_unless(&stop, pause);
            if stop.load(Ordering::Relaxed) {
                return (said, recorded);
            }
            let mut target = ids.clone();
            if below(&mut rng, 4) != 0 {
                target.remove(below(&mut rng, target.len() as u64) as usize);
            }
            let list: Vec<String> = target.iter().map(i32::to_string).collect();
            let list = list.join(",");
            let output = quorum_tool(&host, &servers, &["reassign", "--voters", &list]);
            recorded += usize::from(output.status.success());
            let answer = String::from_utf8_lossy(&output.stdout).into_owned()
                + &String::from_utf8_lossy(&output.stderr);
            said.push(format!(
                "{:>6} ms: reassign --voters {list}: {}, {:?}",
                started.elapsed().as_millis(),
                output.status,
                answer.lines().next().unwrap_or("")
            ));
        }
    })
}

/// Waits (bounded: [`WAIT`] three times) until `ringraft quorum reassign --verify` says no
/// reassignment is in progress; its last output otherwise.
fn wait_for_no_reassignment(cluster: &Cluster) -> Result<(), String> {
    let servers = servers(cluster);
    let deadline = Instant::now() + 3 * WAIT;
    loop {
        let host = cluster.lab.as_ref().unwrap().client();
        let output = quorum_tool(host, &servers, &["reassign", "--verify"]);
        if output.status.success() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "a reassignment still in progress after {:?}: {}",
                3 * WAIT,
                String::from_utf8_lossy(&output.stdout)
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The value that stands more than once in `log`, if one does.
fn repeated_value(log: &[(i64, String)]) -> Option<&str> {
    let mut seen = std::collections::HashSet::new();
    log.iter()
        .map(|(_, v)| v.as_str())
        .find(|v| !seen.insert(*v))
}

/// What a nemesis run adds to the plain one.
#[derive(Default)]
struct Variant {
    /// Voter changes asked for meanwhile ([`start_reassigner`]).
    reassign: bool,
    /// The writers' values padded to this many bytes more, so that retention has segments to
    /// delete.
    padding: usize,
}

#[test]
fn under_a_seeded_nemesis_nothing_acknowledged_is_lost_and_the_voters_agree() {
    nemesis(Cluster::new_in_lab(3, 3), "PLAINTEXT", Variant::default());
}

/// The same with the voters on mutual TLS, as a production cluster runs: every reconnection
/// after a kill, a pause or a cut is a handshake.
#[test]
fn under_a_seeded_nemesis_voters_on_mutual_tls_lose_nothing_acknowledged() {
    nemesis(
        Cluster::new_mutual_tls_in_lab(3, 3),
        "mutual TLS",
        Variant::default(),
    );
}

/// The same with a fourth node, an observer at first, and the voter set changed at random
/// meanwhile (each new target overwriting the last): the faults land on changes half done.
#[test]
fn under_a_seeded_nemesis_with_voter_changes_nothing_acknowledged_is_lost() {
    let mut cluster = Cluster::new_in_lab(3, 4);
    let voters_line = format!("quorum.voters={}", cluster.voters_value());
    cluster
        .add_node(4, "node-4", CLUSTER_ID, &voters_line)
        .unwrap();
    let variant = Variant {
        reassign: true,
        ..Variant::default()
    };
    nemesis(cluster, "PLAINTEXT, with voter changes", variant);
}

/// The same with retention deleting segments all along (1 MiB segments, 2 MiB kept, checked
/// every 200 ms): a node restarted or cut off for a while comes back behind the leader's log
/// start and starts its log again there, under the faults. Each log then holds what is at or
/// above its start, and the logs agree from the latest start on.
#[test]
fn under_a_seeded_nemesis_with_retention_nothing_kept_is_lost() {
    let cluster = Cluster::new_in_lab_with(3, 3, |s| {
        s.segment_bytes = Some(1 << 20);
        s.overrides = vec![
            "retention.bytes=2097152".into(),
            "log.retention.check.interval.ms=200".into(),
        ];
    });
    let variant = Variant {
        padding: 300,
        ..Variant::default()
    };
    nemesis(cluster, "PLAINTEXT, with retention", variant);
}

/// Runs the schedule against `cluster` (voters in a lab, and with voter changes an observer,
/// none started) and checks the history, as the file's head says.
fn nemesis(mut cluster: Cluster, voters: &str, variant: Variant) {
    let reassign = variant.reassign;
    let seed = seed();
    let run = schedule_length();
    eprintln!("nemesis, voters on {voters}: RINGRAFT_NEMESIS_SEED={seed} for {run:?}");
    let mut rng = XorShift64(seed);

    cluster.start_all();
    cluster.wait_for_settled_leader(None);
    let stop = Arc::new(AtomicBool::new(false));
    let (history, writers) = start_writers(&cluster, &"x".repeat(variant.padding), &stop);
    let stop_reassigner = Arc::new(AtomicBool::new(false));
    let reassigner = reassign.then(|| start_reassigner(&cluster, seed, &stop_reassigner));
    let mut schedule = run_schedule(&mut cluster, &mut rng, run);
    let rounds = schedule.len();
    stop_reassigner.store(true, Ordering::Relaxed);
    let mut changes = String::new();
    if let Some(reassigner) = reassigner {
        let (said, recorded) = reassigner.join().unwrap();
        changes = format!(
            ", {recorded} of {} voter sets asked for recorded",
            said.len()
        );
        schedule.push("voter changes asked for:".into());
        schedule.extend(said);
    }
    let report = |cluster: &Cluster, what: &str| {
        format!(
            "{what} (voters on {voters}, RINGRAFT_NEMESIS_SEED={seed})\nschedule:\n{}\n{}",
            schedule.join("\n"),
            cluster.quorum_report()
        )
    };

    // Every fault is undone: the last target is reached under the load, the cluster commits
    // again, and no node stopped on its own.
    if reassign {
        if let Err(e) = wait_for_no_reassignment(&cluster) {
            panic!("{}", report(&cluster, &e));
        }
    }
    let before = acked_total(&history);
    let deadline = Instant::now() + WAIT;
    while acked_total(&history) < before + RECORDS_AFTER_HEALING && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let healed = acked_total(&history) - before;
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    assert!(
        healed >= RECORDS_AFTER_HEALING,
        "{}",
        report(
            &cluster,
            &format!("{healed} records acknowledged in {WAIT:?} after every fault was undone")
        )
    );
    if let Err(e) = cluster.check_running() {
        panic!("{}", report(&cluster, &e));
    }

    let history: Vec<Vec<(i64, String)>> =
        history.iter().map(|h| h.lock().unwrap().clone()).collect();
    for (writer, acked) in history.iter().enumerate() {
        let out_of_order = acked.windows(2).find(|pair| pair[0].0 >= pair[1].0);
        assert!(
            out_of_order.is_none(),
            "{}",
            report(
                &cluster,
                &format!("writer {writer}: acknowledged one after the other, yet {out_of_order:?}")
            )
        );
    }
    let end = history
        .iter()
        .filter_map(|acked| acked.last().map(|(offset, _)| offset + 1))
        .max()
        .unwrap();
    let every_node: Vec<i32> = cluster.nodes.iter().map(|n| n.id).collect();
    if let Err(e) = (*cluster).wait_for_replicas_at(&every_node, end, WAIT) {
        panic!("{}", report(&cluster, &e));
    }
    cluster.stop_all_cleanly();

    // (node, log start, log): retention may have deleted what is below a log's start.
    let logs: Vec<_> = cluster
        .nodes
        .iter()
        .map(|node| (node.id, log_start(&node.dir), read_log(&node.dir)))
        .collect();
    for (id, start, log) in &logs {
        if let Some(value) = repeated_value(log) {
            panic!(
                "{}",
                report(&cluster, &format!("node {id}: {value:?} stands twice"))
            );
        }
        for (writer, acked) in history.iter().enumerate() {
            let kept: Vec<(i64, String)> =
                acked.iter().filter(|(o, _)| o >= start).cloned().collect();
            assert!(
                log_holds_once_in_order(log, &kept),
                "{}",
                report(
                    &cluster,
                    &format!(
                        "node {id} (log start {start}): writer {writer}'s acknowledged records \
                         are not each once at their offsets, in order"
                    )
                )
            );
        }
    }
    let starts: Vec<i64> = logs.iter().map(|(_, start, _)| *start).collect();
    let mut resets = String::new();
    if variant.padding > 0 {
        assert!(
            starts.iter().all(|&start| start > 0),
            "{}",
            report(
                &cluster,
                &format!("retention moved no log start: {starts:?}")
            )
        );
        // How often a node came back behind the leader's log start (the node's warning).
        let count: usize = cluster
            .nodes
            .iter()
            .map(|n| std::fs::read_to_string(cluster.stderr_path(n.id)).unwrap_or_default())
            .map(|text| text.matches("dropping it and starting it again").count())
            .sum();
        resets = format!(", {count} logs started again at the leader's start");
    }
    // From the latest start on, every log holds the same records.
    let common = *starts.iter().max().unwrap();
    let from_common = |log: &[(i64, String)]| -> Vec<(i64, String)> {
        log.iter().filter(|(o, _)| *o >= common).cloned().collect()
    };
    let (first_id, _, first_log) = &logs[0];
    let first_log = from_common(first_log);
    for (id, _, log) in &logs[1..] {
        let log = from_common(log);
        let differs = first_log.iter().zip(&log).position(|(a, b)| a != b);
        assert!(
            differs.is_none() && first_log.len() == log.len(),
            "{}",
            report(
                &cluster,
                &format!(
                    "from offset {common} on, node {first_id} holds {} records and node {id} {}; \
                     the first that differs is record {differs:?}",
                    first_log.len(),
                    log.len()
                )
            )
        );
    }
    eprintln!(
        "nemesis, voters on {voters}: {rounds} rounds of faults{changes}; {} records acknowledged \
         ({healed} after the last), {} in each log from offset {common} (log starts \
         {starts:?}){resets}",
        history.iter().map(Vec::len).sum::<usize>(),
        first_log.len()
    );
}
