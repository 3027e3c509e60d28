//! Scenario tests of the core, named after the behaviours of Kafka's own suites (docs/testing.md,
//! "Behaviours the scenario tests cover"), driven through `step()` with the harness in
//! `harness.rs`.

mod harness;

mod bootstrap;
mod consumer;
mod discovery;
mod election;
mod fetch;
mod fetch_retry_kinds;
mod fetch_survivors;
mod high_watermark;
mod hostile;
mod init;
mod lease;
mod observer_pacing;
mod pre_vote;
mod quorum_epoch;
mod reassign;
mod retention;
mod storage;
mod transitions;
mod views;
mod voter_identity;
