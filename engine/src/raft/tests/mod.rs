//! Scenario tests of the core, named after the behaviours of protocol.md section 22, driven
//! through `step()` with the harness in `harness.rs`.

mod harness;

mod bootstrap;
mod discovery;
mod election;
mod fetch;
mod high_watermark;
mod hostile;
mod init;
mod quorum_epoch;
mod transitions;
