//! Requests this core sent and has not heard back about: correlation ids, the request timeout,
//! and retries with exponential backoff (x2 per attempt, ~20% jitter, capped).

use std::collections::BTreeMap;

use super::rng::SplitMix64;
use super::types::{Correlation, Epoch, NodeId, Offset, Output, TimeMs};
use super::{Request, VoterEndpoint};

/// What a request was, so its response can be matched against the state that sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestKind {
    Vote,
    /// A Vote with PreVote set (docs/protocol.md, "Pre-vote").
    PreVote,
    BeginQuorumEpoch,
    EndQuorumEpoch,
    Fetch {
        fetch_offset: Offset,
        last_fetched_epoch: Epoch,
    },
    FindQuorum,
    /// A FindQuorum on a connection of its own, checking a voter's advertised endpoint.
    Probe,
}

#[derive(Clone, Debug)]
pub(crate) struct InFlight {
    pub(crate) to: NodeId,
    pub(crate) epoch: Epoch,
    pub(crate) kind: RequestKind,
    pub(crate) deadline: TimeMs,
}

/// A send to repeat once its backoff has passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    Vote(NodeId),
    PreVote(NodeId),
    BeginQuorumEpoch(NodeId),
    EndQuorumEpoch(NodeId),
    Fetch,
    FindQuorum,
}

#[derive(Debug)]
pub(crate) struct Outbound {
    next_correlation: Correlation,
    /// In send (= correlation) order; a handful of entries, so a Vec beats a map here
    /// (a map of one entry allocates and frees its node on every send/answer).
    in_flight: Vec<(Correlation, InFlight)>,
    /// (due time, sequence) -> what to resend.
    retries: BTreeMap<(TimeMs, u64), Retry>,
    retry_seq: u64,
    attempts: BTreeMap<NodeId, u32>,
    backoff_ms: u64,
    backoff_max_ms: u64,
    request_timeout_ms: u64,
}

impl Outbound {
    /// `first_correlation` is drawn at random so that responses addressed to an earlier
    /// incarnation of this node do not match this one's requests.
    pub(crate) fn new(
        first_correlation: Correlation,
        backoff_ms: u64,
        backoff_max_ms: u64,
        request_timeout_ms: u64,
    ) -> Self {
        Self {
            next_correlation: first_correlation,
            in_flight: Vec::new(),
            retries: BTreeMap::new(),
            retry_seq: 0,
            attempts: BTreeMap::new(),
            backoff_ms: backoff_ms.max(1),
            backoff_max_ms: backoff_max_ms.max(backoff_ms.max(1)),
            request_timeout_ms,
        }
    }

    pub(crate) fn send(
        &mut self,
        out: &mut Vec<Output>,
        now: TimeMs,
        to: NodeId,
        epoch: Epoch,
        kind: RequestKind,
        request: Request,
    ) -> Correlation {
        let correlation = self.track(now, to, epoch, kind);
        out.push(Output::Send {
            to,
            correlation,
            request,
        });
        correlation
    }

    /// Like [`Outbound::send`], but to an advertised endpoint rather than the voter's current
    /// address ([`Output::ProbeEndpoint`]).
    pub(crate) fn probe(
        &mut self,
        out: &mut Vec<Output>,
        now: TimeMs,
        epoch: Epoch,
        endpoint: VoterEndpoint,
        request: Request,
    ) -> Correlation {
        let correlation = self.track(now, endpoint.voter_id, epoch, RequestKind::Probe);
        out.push(Output::ProbeEndpoint {
            correlation,
            endpoint,
            request,
        });
        correlation
    }

    /// Records a request to `to` as in flight under a correlation id no other request in
    /// flight has (responses are matched by it alone), with its timeout.
    fn track(&mut self, now: TimeMs, to: NodeId, epoch: Epoch, kind: RequestKind) -> Correlation {
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        debug_assert!(
            self.in_flight.iter().all(|(c, _)| *c != correlation),
            "correlation {correlation} reused"
        );
        self.in_flight.push((
            correlation,
            InFlight {
                to,
                epoch,
                kind,
                deadline: now + self.request_timeout_ms,
            },
        ));
        correlation
    }

    /// Removes and returns the request a response or failure refers to.
    pub(crate) fn take(&mut self, correlation: Correlation, from: NodeId) -> Option<InFlight> {
        let idx = self
            .in_flight
            .iter()
            .position(|(c, f)| *c == correlation && f.to == from)?;
        Some(self.in_flight.remove(idx).1)
    }

    /// Forgets everything but endpoint probes: after a role change no answer to an earlier
    /// request matters, but a voter's address is not about roles.
    pub(crate) fn clear(&mut self) {
        self.in_flight.retain(|(_, f)| f.kind == RequestKind::Probe);
        self.retries.clear();
    }

    pub(crate) fn any_in_flight(&self, pred: impl Fn(&InFlight) -> bool) -> bool {
        self.in_flight.iter().any(|(_, f)| pred(f))
    }

    pub(crate) fn any_retry(&self, pred: impl Fn(Retry) -> bool) -> bool {
        self.retries.values().any(|r| pred(*r))
    }

    /// Forgets in-flight requests matching `pred` (their answers will be ignored).
    pub(crate) fn forget(&mut self, pred: impl Fn(&InFlight) -> bool) {
        self.in_flight.retain(|(_, f)| !pred(f));
    }

    /// Among in-flight requests matching `pred`, forgets all but the newest.
    pub(crate) fn keep_newest(&mut self, pred: impl Fn(&InFlight) -> bool) {
        let newest = self
            .in_flight
            .iter()
            .rev()
            .find(|(_, f)| pred(f))
            .map(|(c, _)| *c);
        self.in_flight
            .retain(|(c, f)| !pred(f) || Some(*c) == newest);
    }

    /// Requests whose timeout passed, removed from the in-flight set.
    pub(crate) fn take_expired(&mut self, now: TimeMs) -> Vec<(Correlation, InFlight)> {
        if !self.in_flight.iter().any(|(_, f)| f.deadline <= now) {
            return Vec::new();
        }
        let (expired, alive): (Vec<_>, Vec<_>) = std::mem::take(&mut self.in_flight)
            .into_iter()
            .partition(|(_, f)| f.deadline <= now);
        self.in_flight = alive;
        expired
    }

    /// Retries that are due, removed from the schedule.
    pub(crate) fn take_due_retries(&mut self, now: TimeMs) -> Vec<Retry> {
        let mut due = Vec::new();
        while let Some(entry) = self.retries.first_entry() {
            if entry.key().0 > now {
                break;
            }
            due.push(entry.remove());
        }
        due
    }

    /// Schedules `retry` after the next backoff step for `to`.
    pub(crate) fn schedule_retry(
        &mut self,
        now: TimeMs,
        to: NodeId,
        retry: Retry,
        rng: &mut SplitMix64,
    ) {
        let delay = self.next_backoff(to, rng);
        self.retry_seq += 1;
        self.retries.insert((now + delay, self.retry_seq), retry);
    }

    /// The backoff before the next attempt at `to`: base x 2^attempts, +-20%, capped.
    pub(crate) fn next_backoff(&mut self, to: NodeId, rng: &mut SplitMix64) -> u64 {
        let attempts = self.attempts.entry(to).or_insert(0);
        let exp = (*attempts).min(20);
        *attempts = attempts.saturating_add(1);
        let base = self
            .backoff_ms
            .saturating_mul(1u64 << exp)
            .min(self.backoff_max_ms);
        let jitter = base / 5;
        let delay = base - jitter + rng.up_to(2 * jitter);
        delay.clamp(1, self.backoff_max_ms)
    }

    /// A successful exchange with `to` resets its backoff.
    pub(crate) fn reset_backoff(&mut self, to: NodeId) {
        self.attempts.remove(&to);
    }

    pub(crate) fn next_deadline(&self) -> Option<TimeMs> {
        let inflight = self.in_flight.iter().map(|(_, f)| f.deadline).min();
        let retry = self.retries.keys().next().map(|k| k.0);
        match (inflight, retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let mut o = Outbound::new(1, 20, 1000, 2000);
        let mut rng = SplitMix64::new(1, 1);
        let delays: Vec<u64> = (0..10).map(|_| o.next_backoff(2, &mut rng)).collect();
        assert!((16..=24).contains(&delays[0]), "{delays:?}");
        assert!((32..=48).contains(&delays[1]), "{delays:?}");
        assert!((64..=96).contains(&delays[2]), "{delays:?}");
        assert!(delays.iter().all(|d| *d <= 1000));
        assert!(delays[9] >= 800);
        o.reset_backoff(2);
        assert!(o.next_backoff(2, &mut rng) <= 24);
    }
}
