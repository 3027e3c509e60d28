//! The event trace: a running hash of every event (for the determinism check) and the last few
//! events, kept compact and formatted only when a violation is reported.

use std::collections::VecDeque;

use crate::raft::{NodeId, TimeMs};

#[derive(Clone, Copy, Debug)]
pub struct TraceEntry {
    time: TimeMs,
    kind: &'static str,
    node: NodeId,
    a: i64,
    b: i64,
}

impl TraceEntry {
    pub fn new(time: TimeMs, kind: &'static str, node: NodeId, a: i64, b: i64) -> Self {
        Self {
            time,
            kind,
            node,
            a,
            b,
        }
    }

    fn render(&self) -> String {
        let what = match self.kind {
            "request" => format!(
                "node {} <- request api {} from {}",
                self.node, self.b, self.a
            ),
            "response" => format!(
                "node {} <- response api {} from {}",
                self.node, self.b, self.a
            ),
            "durable" => format!("node {} durable up to seq {}", self.node, self.a),
            "read-done" => format!(
                "node {} read from {} ({} batches)",
                self.node, self.a, self.b
            ),
            "client-append" => format!("node {} <- client append {}", self.node, self.a),
            "elected" => format!("node {} elected leader of epoch {}", self.node, self.a),
            "truncate" => format!("node {} truncates to {}", self.node, self.a),
            "start" => format!("node {} starts (incarnation {})", self.node, self.a),
            "one-way" => format!("link {} -> {} cut", self.node, self.a),
            "partition" => format!("network split into {} groups", self.a),
            "grant" => format!(
                "node {} grants its epoch-{} vote to {}",
                self.node, self.b, self.a
            ),
            "persist" => format!(
                "node {} persists epoch {} leader {} voted {}",
                self.node,
                self.a,
                self.b / 100_000 - 1,
                self.b % 100_000 - 1
            ),
            "leader-hw" => format!(
                "leader {} (epoch {}) exposes HW {}",
                self.node, self.b, self.a
            ),
            "mid-step-crash" => format!(
                "node {} crashes after {} outputs of a step",
                self.node, self.a
            ),
            "chaos" => format!("chaos roll {} on node {}", self.a, self.node),
            "lie" if self.a < 0 => {
                format!("liar -> node {}: stray response api {}", self.node, -self.a)
            }
            "lie" => format!("liar -> node {}: request api {}", self.node, self.a),
            kind => format!("{kind} node {}", self.node),
        };
        format!("t={}ms {what}", self.time)
    }
}

pub struct Trace {
    recent: VecDeque<TraceEntry>,
    capacity: usize,
    hash: u64,
}

impl Trace {
    pub fn new(capacity: usize) -> Self {
        Self {
            recent: VecDeque::with_capacity(capacity),
            capacity,
            hash: 0xcbf2_9ce4_8422_2325,
        }
    }

    pub fn push(&mut self, e: TraceEntry) {
        for word in [
            e.time,
            e.node as u64,
            e.a as u64,
            e.b as u64,
            e.kind.len() as u64,
        ] {
            for byte in word.to_le_bytes() {
                self.hash ^= u64::from(byte);
                self.hash = self.hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        if self.capacity == 0 {
            return;
        }
        if self.recent.len() == self.capacity {
            self.recent.pop_front();
        }
        self.recent.push_back(e);
    }

    pub fn hash(&self) -> u64 {
        self.hash
    }

    pub fn render(&self) -> Vec<String> {
        self.recent.iter().map(TraceEntry::render).collect()
    }
}
