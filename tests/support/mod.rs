//! Code shared by the test binaries: sequential models of the distributor (atomic,
//! ordered and pipeline) and of the multi-node layout, two-node layouts, wakers that count, and the
//! tests' pseudo-random generator.

// Test binaries export nothing: `pub` here only shares items between their modules.
#![allow(unreachable_pub)]

#[cfg(feature = "std")]
pub mod dist_model;
#[cfg(feature = "std")]
pub mod nodes_layout;
#[cfg(feature = "std")]
pub mod nodes_model;
#[cfg(feature = "std")]
pub mod ordered_model;
#[cfg(feature = "std")]
pub mod pipeline_model;
pub mod rng;
#[cfg(feature = "std")]
pub mod waker;
