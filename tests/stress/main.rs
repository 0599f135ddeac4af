//! Threaded stress tests of the rings and their waits.

// Each binary uses part of the shared support code.
#[allow(dead_code)]
#[cfg(not(loom))]
#[path = "../support/mod.rs"]
mod support;

mod mpsc;
mod spsc;
mod wait;
