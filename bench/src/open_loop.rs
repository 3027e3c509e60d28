//! The send schedule and the in-flight window of one load connection, kept free of clocks and
//! sockets (times are nanoseconds since the load's start) so the coordinated-omission
//! correction can be tested on its own.
//!
//! Open loop (`--rate`): request k of a connection is due at `offset + k * period`. When the
//! window is full the send waits, and the request's latency is still counted from the time it
//! was due, so a stalled server cannot hide its stall by slowing the sender down (coordinated
//! omission). After a stall the connection sends back to back until it is on schedule again.
//! Closed loop (no rate): a request is due as soon as the window has room, and its latency
//! counts from the actual send.

use std::collections::VecDeque;

/// When a connection's next request is due.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// None: closed loop (always due).
    open: Option<OpenSchedule>,
}

#[derive(Debug, Clone)]
struct OpenSchedule {
    offset_ns: u64,
    period_ns: u64,
    next: u64,
}

impl Schedule {
    pub fn closed() -> Self {
        Self { open: None }
    }

    /// Requests every `period_ns`, the first at `offset_ns`.
    pub fn open(offset_ns: u64, period_ns: u64) -> Self {
        assert!(period_ns > 0);
        Self {
            open: Some(OpenSchedule {
                offset_ns,
                period_ns,
                next: 0,
            }),
        }
    }

    /// Connection `index` of `connections` sharing `requests_per_sec` evenly, their first sends
    /// spread over one period so they do not all fire together.
    pub fn share_of_rate(requests_per_sec: f64, connections: usize, index: usize) -> Self {
        assert!(requests_per_sec > 0.0 && connections > 0 && index < connections);
        let period_ns = ((1e9 * connections as f64 / requests_per_sec).round() as u64).max(1);
        Self::open(period_ns * index as u64 / connections as u64, period_ns)
    }

    /// The intended send time of the next request if it is due at `now_ns`. Closed loop: `now_ns`.
    pub fn due(&self, now_ns: u64) -> Option<u64> {
        match &self.open {
            None => Some(now_ns),
            Some(open) => {
                let intended = open.offset_ns + open.next * open.period_ns;
                (intended <= now_ns).then_some(intended)
            }
        }
    }

    /// When the next request falls due (None: closed loop, always due).
    pub fn next_due(&self) -> Option<u64> {
        self.open
            .as_ref()
            .map(|open| open.offset_ns + open.next * open.period_ns)
    }

    /// The next request was sent.
    pub fn advance(&mut self) {
        if let Some(open) = &mut self.open {
            open.next += 1;
        }
    }
}

/// The requests in flight on one connection: correlation id, the time each latency counts from
/// (intended send time in open loop, actual send time in closed loop) and the actual send time.
#[derive(Debug)]
pub struct Window {
    depth: usize,
    in_flight: VecDeque<(i32, u64, u64)>,
}

/// What one answer records, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    /// From the intended send time (corrected for coordinated omission).
    pub latency_ns: u64,
    /// From the actual send time (what the server took, queueing in the window excluded).
    pub service_ns: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub struct UnknownCorrelation(pub i32);

impl Window {
    pub fn new(depth: usize) -> Self {
        assert!(depth > 0);
        Self {
            depth,
            in_flight: VecDeque::with_capacity(depth),
        }
    }

    pub fn has_room(&self) -> bool {
        self.in_flight.len() < self.depth
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    pub fn sent(&mut self, correlation_id: i32, intended_ns: u64, sent_ns: u64) {
        assert!(self.has_room());
        assert!(intended_ns <= sent_ns, "sent before it was due");
        self.in_flight
            .push_back((correlation_id, intended_ns, sent_ns));
    }

    /// A response arrived at `now_ns`. Responses usually come in order, but a refused request
    /// may be answered before earlier ones, so match by id.
    pub fn answered(
        &mut self,
        correlation_id: i32,
        now_ns: u64,
    ) -> Result<Answered, UnknownCorrelation> {
        let at = self
            .in_flight
            .iter()
            .position(|(id, _, _)| *id == correlation_id)
            .ok_or(UnknownCorrelation(correlation_id))?;
        let (_, intended, sent) = self.in_flight.remove(at).expect("position is in range");
        Ok(Answered {
            latency_ns: now_ns.saturating_sub(intended),
            service_ns: now_ns.saturating_sub(sent),
        })
    }
}

/// One connection against a server that answers requests in order, one at a time, each taking
/// `service_ns[k]` from when it reaches the server (or from the previous answer, whichever is
/// later); sends take no time. Returns each request's recorded latency. This is the load loop's
/// logic with the clock and the socket replaced, for tests.
#[cfg(test)]
pub fn simulate(mut schedule: Schedule, depth: usize, service_ns: &[u64]) -> Vec<u64> {
    let mut window = Window::new(depth);
    let mut now = 0u64;
    let mut server_free_at = 0u64;
    // (correlation id, time its answer arrives), in send order.
    let mut answers: VecDeque<(i32, u64)> = VecDeque::new();
    let mut latencies = Vec::new();
    let mut sent = 0usize;
    while latencies.len() < service_ns.len() {
        if sent < service_ns.len() && window.has_room() {
            if let Some(from) = schedule.due(now) {
                let id = sent as i32;
                window.sent(id, from, now);
                let done = server_free_at.max(now) + service_ns[sent];
                server_free_at = done;
                answers.push_back((id, done));
                schedule.advance();
                sent += 1;
                continue;
            }
        }
        // Nothing to send now: wait for the next answer or the next due time.
        let next_answer = answers.front().map(|(_, at)| *at);
        let next_send = if sent < service_ns.len() && window.has_room() {
            schedule.next_due()
        } else {
            None
        };
        let answer_first = match (next_answer, next_send) {
            (Some(answer), Some(send)) => answer <= send,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => unreachable!("nothing in flight and nothing due"),
        };
        if answer_first {
            let (id, at) = answers.pop_front().expect("an answer is pending");
            now = now.max(at);
            latencies.push(window.answered(id, now).expect("sent").latency_ns);
        } else {
            now = now.max(next_send.expect("a send is due"));
        }
    }
    latencies
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn closed_loop_latency_is_the_service_time() {
        let latencies = simulate(Schedule::closed(), 1, &[MS, 10 * MS, MS, MS]);
        assert_eq!(latencies, vec![MS, 10 * MS, MS, MS]);
    }

    #[test]
    fn open_loop_counts_the_wait_behind_a_stall() {
        // One request every ms, one in flight; the second takes 10 ms. Requests 3.. were due at
        // 2, 3, 4 ms but could only be sent when the window freed up (at 11 ms, then 12, ...).
        let service = [MS, 10 * MS, MS, MS, MS];
        let latencies = simulate(Schedule::open(0, MS), 1, &service);
        // 0: sent at 0, done 1. 1: due/sent 1, done 11. 2: due 2, sent 11, done 12 -> 10 ms.
        // 3: due 3, sent 12, done 13 -> 10 ms. 4: due 4, sent 13, done 14 -> 10 ms.
        assert_eq!(latencies, vec![MS, 10 * MS, 10 * MS, 10 * MS, 10 * MS]);
        // Closed loop hides the stall from every request but the slow one.
        let closed = simulate(Schedule::closed(), 1, &service);
        assert_eq!(closed, vec![MS, 10 * MS, MS, MS, MS]);
    }

    #[test]
    fn open_loop_catches_up_when_the_server_is_faster_than_the_schedule() {
        // Due every 4 ms, served in 1 ms: no waiting, latency = service time.
        let latencies = simulate(Schedule::open(0, 4 * MS), 1, &[MS; 6]);
        assert_eq!(latencies, vec![MS; 6]);
    }

    #[test]
    fn a_deeper_window_absorbs_a_stall_the_server_queues() {
        // Due every ms, 4 in flight, the first takes 5 ms: the next three are sent on time and
        // queue behind it at the server.
        let latencies = simulate(Schedule::open(0, MS), 4, &[5 * MS, MS, MS, MS, MS]);
        // 0: 0->5. 1: sent 1, served 5->6: 5. 2: sent 2, 6->7: 5. 3: sent 3, 7->8: 5.
        // 4: due 4, window full until 5, sent 5, served 8->9: 5.
        assert_eq!(latencies, vec![5 * MS; 5]);
    }

    #[test]
    fn rate_is_shared_and_staggered() {
        // 1000 requests/s over 4 connections: each every 4 ms, starts 1 ms apart.
        let schedules: Vec<_> = (0..4)
            .map(|i| Schedule::share_of_rate(1000.0, 4, i))
            .collect();
        let firsts: Vec<_> = schedules.iter().map(|s| s.next_due().unwrap()).collect();
        assert_eq!(firsts, vec![0, MS, 2 * MS, 3 * MS]);
        let mut first = schedules[0].clone();
        first.advance();
        assert_eq!(first.next_due(), Some(4 * MS));
        assert_eq!(first.due(4 * MS - 1), None);
        assert_eq!(first.due(9 * MS), Some(4 * MS));
    }

    #[test]
    fn answers_are_matched_by_correlation_id() {
        let mut window = Window::new(3);
        window.sent(7, 100, 100);
        window.sent(8, 200, 200);
        window.sent(9, 300, 600);
        assert!(!window.has_room());
        let ninth = window.answered(9, 1000).unwrap();
        assert_eq!((ninth.latency_ns, ninth.service_ns), (700, 400));
        assert_eq!(window.answered(7, 1000).unwrap().latency_ns, 900);
        assert_eq!(window.answered(7, 1000), Err(UnknownCorrelation(7)));
        assert!(window.has_room() && !window.is_empty());
        window.answered(8, 1000).unwrap();
        assert!(window.is_empty());
    }
}
