//! Scenario tests of the core (protocol.md section 22).
