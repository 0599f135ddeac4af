//! The distributor and the multi-node layout: behaviour, errors, leaves and panics, and the
//! migration interleavings step by step.

// Each binary uses part of the shared support code.
#[allow(dead_code)]
#[cfg(all(not(loom), feature = "std"))]
#[path = "../support/mod.rs"]
mod support;

mod any_order;
mod batching;
mod guarantees;
mod membership;
mod nodes_interleavings;
mod nodes_reschedule_migration;
mod nodes_steps;
mod nodes_threads;
mod ordered;
mod pipeline;
mod rejoin;
mod routing_and_panics;
mod wait_progress;
mod waits;
