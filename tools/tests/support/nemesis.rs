//! The nemesis's faults on a lab cluster (testkit's netns lab): a seeded schedule of kills and
//! restarts, pauses, cut-offs and severed pairs, for process tests that check a history
//! against the logs afterwards (tools/tests/nemesis.rs, and the Kafka clients' run in
//! tools/tests/clients.rs).

use std::time::{Duration, Instant};

use engine::sim::XorShift64;

use super::{Cluster, STOP_WAIT};

/// How long a schedule runs when `RINGRAFT_NEMESIS_SECONDS` does not say.
pub const DEFAULT_SECONDS: u64 = 30;

/// The schedule's length: `RINGRAFT_NEMESIS_SECONDS`, else [`DEFAULT_SECONDS`].
pub fn schedule_length() -> Duration {
    Duration::from_secs(env_u64("RINGRAFT_NEMESIS_SECONDS").unwrap_or(DEFAULT_SECONDS))
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// SIGKILL, restarted when undone.
    Kill,
    /// SIGSTOP, SIGCONT when undone.
    Pause,
    /// Its namespace's interface down, up when undone.
    Cut,
    /// Severed from this other node only, the rest of the network kept; mended when undone.
    Sever(i32),
}

/// A fault in force on one node.
#[derive(Debug)]
pub struct Applied {
    pub node: i32,
    pub fault: Fault,
}

/// The number in environment variable `name`, if set (a panic naming it if it is no number).
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|e| panic!("{name}={v:?}: not a number: {e}"))
    })
}

/// `RINGRAFT_NEMESIS_SEED`, else one from the clock; never 0, which xorshift would keep.
pub fn seed() -> u64 {
    let given = env_u64("RINGRAFT_NEMESIS_SEED");
    assert_ne!(
        given,
        Some(0),
        "RINGRAFT_NEMESIS_SEED=0: xorshift needs a state other than 0"
    );
    given.unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        nanos | 1
    })
}

/// A uniform pick in `0..n` (n > 0).
pub fn below(rng: &mut XorShift64, n: u64) -> u64 {
    assert!(n > 0);
    rng.next_u64() % n
}

/// A uniform pick between `low` and `high` milliseconds, both included.
pub fn millis_between(rng: &mut XorShift64, low: u64, high: u64) -> Duration {
    Duration::from_millis(low + below(rng, high - low + 1))
}

/// Puts `applied` in force (a kill waits, bounded, for the process to be gone).
pub fn apply(cluster: &mut Cluster, applied: &Applied) {
    match applied.fault {
        Fault::Kill => {
            let process = cluster.node(applied.node).process.as_mut().unwrap();
            process.signal(libc::SIGKILL);
            assert!(
                process.wait_exit(STOP_WAIT).is_some(),
                "node {} outlived SIGKILL",
                applied.node
            );
        }
        Fault::Pause => {
            let process = cluster.node(applied.node).process.as_ref().unwrap();
            process.signal(libc::SIGSTOP);
        }
        Fault::Cut => cluster.cut(applied.node).unwrap(),
        Fault::Sever(other) => cluster.sever(applied.node, other).unwrap(),
    }
}

/// Ends `applied`: a restart, SIGCONT, the interface up, or the pair mended.
pub fn undo(cluster: &mut Cluster, applied: &Applied) {
    match applied.fault {
        Fault::Kill => cluster.start(applied.node, &[]),
        Fault::Pause => {
            let process = cluster.node(applied.node).process.as_ref().unwrap();
            process.signal(libc::SIGCONT);
        }
        Fault::Cut => cluster.heal(applied.node).unwrap(),
        Fault::Sever(other) => cluster.mend(applied.node, other).unwrap(),
    }
}

/// Runs the seeded schedule for `run`: each round puts one fault (or, one round in four, two on
/// different nodes, the second never a sever) on the leader or a random node, holds it 0.3-4 s,
/// undoes it and lets the cluster be for 0.3-2 s. Returns the schedule as text, for the report.
pub fn run_schedule(cluster: &mut Cluster, rng: &mut XorShift64, run: Duration) -> Vec<String> {
    let faults = [Fault::Kill, Fault::Pause, Fault::Cut];
    let started = Instant::now();
    let mut schedule = Vec::new();
    while started.elapsed() < run {
        // A node that stopped on its own must not be hidden by a kill and restart: the round
        // ends the schedule, and the check after it names the node.
        if let Err(e) = cluster.check_running() {
            schedule.push(format!("stopped on its own: {e}"));
            break;
        }
        // The leader is asked for only when the draw wants it (a DescribeQuorum per node).
        let leader = (below(rng, 2) == 0)
            .then(|| cluster.leader_now(None))
            .flatten();
        let first = match leader {
            Some(leader) => leader,
            None => cluster.nodes[below(rng, cluster.nodes.len() as u64) as usize].id,
        };
        let others = cluster.others(first);
        let fault = match below(rng, 4) {
            3 => Fault::Sever(others[below(rng, others.len() as u64) as usize]),
            n => faults[n as usize],
        };
        let mut applied = vec![Applied { node: first, fault }];
        if below(rng, 4) == 0 {
            applied.push(Applied {
                node: others[below(rng, others.len() as u64) as usize],
                fault: faults[below(rng, 3) as usize],
            });
        }
        let hold = millis_between(rng, 300, 4_000);
        let calm = millis_between(rng, 300, 2_000);
        schedule.push(format!(
            "{:>6} ms: {applied:?} for {hold:?}, then {calm:?} calm",
            started.elapsed().as_millis()
        ));
        for fault in &applied {
            apply(cluster, fault);
        }
        std::thread::sleep(hold);
        for fault in &applied {
            undo(cluster, fault);
        }
        std::thread::sleep(calm);
    }
    schedule
}
