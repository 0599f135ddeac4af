//! The distributor and the multi-node layout: behaviour, errors, leaves and panics, and the
//! migration interleavings step by step.

mod any_order;
mod distributor;
mod nodes;
mod nodes_interleavings;
mod nodes_reschedule_migration;
mod ordered;
mod waits;
