//! Property tests against simple sequential models (proptest).

// Each binary uses part of the shared support code.
#[allow(dead_code)]
#[cfg(all(not(loom), feature = "std"))]
#[path = "../support/mod.rs"]
mod support;

mod cell;
mod counter;
mod distributor;
mod lockmeter;
mod mpsc;
mod niche;
mod nodes;
mod ordered;
mod pipeline;
mod slot;
mod spsc;
