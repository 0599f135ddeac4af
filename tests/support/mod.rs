//! Code shared by the test binaries: sequential models of the distributor (atomic and
//! ordered) and of the multi-node layout, and wakers that count.

pub mod dist_model;
pub mod nodes_model;
pub mod ordered_model;
pub mod waker;
