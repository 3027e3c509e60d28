//! `ringraft-bench`: load generator and log benchmark.
fn main() {}
