//! A multi-node layout's shape ([`NodesConfig`]), its limits, and the error of a layout
//! that cannot be built.

use core::fmt;

use crate::distributor::config::{Config, ConfigError};

/// The most nodes one layout has.
///
/// ```
/// assert_eq!(flowline::distributor::nodes::MAX_NODES, 64);
/// ```
pub const MAX_NODES: usize = 64;

/// The layout's shape: start from [`NodesConfig::default`] and set what differs
/// (non-exhaustive: later settings get defaults of their own).
///
/// ```
/// use flowline::distributor::nodes::{self, NodesConfig};
/// let c = NodesConfig::default().nodes(2).workers_per_node(4).credit(256).bridge(1024);
/// assert!(nodes::new(c, |p: &u64| *p).is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodesConfig {
    /// Number of nodes, 1 to [`MAX_NODES`] (the NUMA nodes of
    /// [`Topology::detect`](crate::topology::Topology::detect), or simulated ones).
    pub nodes: usize,
    /// Workers of each node's distributor (as [`Config::workers`]).
    pub workers_per_node: usize,
    /// Each worker's credit (as [`Config::credit`]).
    pub credit: usize,
    /// Slots of each bridge ring (rounded up to a power of two; at least 1, at most what
    /// [`spsc::channel`](crate::fifo::spsc::channel) accepts): how many packets may be on their way from one node to
    /// another.
    pub bridge: usize,
}

impl NodesConfig {
    /// This layout with `nodes` nodes (1 to [`MAX_NODES`]).
    #[must_use]
    pub fn nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }

    /// This layout with `workers` workers per node.
    #[must_use]
    pub fn workers_per_node(mut self, workers: usize) -> Self {
        self.workers_per_node = workers;
        self
    }

    /// This layout with `credit` packets per worker.
    #[must_use]
    pub fn credit(mut self, credit: usize) -> Self {
        self.credit = credit;
        self
    }

    /// This layout with bridges of `slots` packets.
    #[must_use]
    pub fn bridge(mut self, slots: usize) -> Self {
        self.bridge = slots;
        self
    }
}

impl Default for NodesConfig {
    /// One node (set [`nodes`](Self::nodes) to the NUMA nodes used) with the workers of
    /// [`Config::default`], credit 256, and bridges of 1024 packets.
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default();
    /// assert!(c.nodes == 1 && c.workers_per_node >= 1 && (c.credit, c.bridge) == (256, 1024));
    /// ```
    fn default() -> Self {
        let one = Config::default();
        NodesConfig {
            nodes: 1,
            workers_per_node: one.workers,
            credit: one.credit,
            bridge: 1024,
        }
    }
}

/// A layout that cannot be built.
///
/// ```
/// use flowline::distributor::nodes::{self, NodesConfig, NodesError};
/// let c = NodesConfig::default().nodes(0).workers_per_node(1).credit(8).bridge(8);
/// assert_eq!(nodes::new(c, |p: &u64| *p).err(), Some(NodesError::NoNodes));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodesError {
    /// `nodes` is 0.
    NoNodes,
    /// `nodes` is above [`MAX_NODES`].
    TooManyNodes(usize),
    /// A bridge ring could not be made (zero or absurd `bridge`, or the allocator refused).
    Bridge(crate::fifo::CapacityError),
    /// A node's distributor could not be made.
    Distributor(ConfigError),
}

impl fmt::Display for NodesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodesError::NoNodes => write!(f, "a multi-node distributor needs at least 1 node"),
            NodesError::TooManyNodes(n) => {
                write!(f, "{n} nodes requested; at most {MAX_NODES} are supported")
            }
            NodesError::Bridge(e) => write!(f, "bridge ring: {e}"),
            NodesError::Distributor(e) => write!(f, "node distributor: {e}"),
        }
    }
}

impl std::error::Error for NodesError {}
