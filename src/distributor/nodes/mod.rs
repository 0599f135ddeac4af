//! One distributor per NUMA node, bridged by SPSC rings that move bursts between nodes.
//!
//! # Example
//!
//! ```
//! use flowline::distributor::nodes::{self, NodesConfig};
//!
//! // Two nodes, one worker each; packets are (flow, sequence) and the flow is the tag.
//! let cfg = NodesConfig::default().nodes(2).workers_per_node(1).credit(64).bridge(256);
//! let layout = nodes::new(cfg, |p: &(u64, u64)| p.0).unwrap();
//! let threads: Vec<_> = layout
//!     .into_iter()
//!     .map(|(mut node, workers)| {
//!         std::thread::spawn(move || {
//!             let worker_threads: Vec<_> = workers
//!                 .into_iter()
//!                 .map(|mut w| {
//!                     std::thread::spawn(move || {
//!                         let mut b = Vec::new();
//!                         while w.recv_burst_wait(&mut b, 32, std::time::Duration::MAX).is_ok() {
//!                             w.done_burst(&mut b).unwrap();
//!                         }
//!                     })
//!                 })
//!                 .collect();
//!             // Each node's own input: 500 packets of 10 flows, entering here.
//!             let base = node.id() as u64 * 1000;
//!             let mut input: Vec<(u64, u64)> = (0..500).map(|i| (i % 10, base + i)).collect();
//!             let mut out = Vec::new();
//!             while !input.is_empty() {
//!                 node.distribute(&mut input).unwrap();
//!                 node.collect(&mut out);
//!             }
//!             node.flush(&mut out, std::time::Duration::from_secs(30)).unwrap();
//!             drop(node);
//!             for t in worker_threads {
//!                 t.join().unwrap();
//!             }
//!             out.len()
//!         })
//!     })
//!     .collect();
//! let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
//! assert_eq!(total, 1000);
//! ```
//!
//! A distributor whose workers span two sockets misses the last-level cache on a third to
//! half of its loads once the workers are on both (DPDK's distributor study); its
//! maintainers' fix is a distributor per socket, with a ring that moves large bursts of
//! packets to the other socket and the distribution done locally. [`new`] builds that
//! layout: `nodes` [`NodeDistributor`]s, each with its own workers, and one SPSC bridge ring
//! from every node to every other.
//!
//! * **Ownership.** Every flow tag has one owning node: tags hash into [`BUCKETS`] buckets
//!   ([`bucket_of`]), and each bucket has an owner, [`owner_of`] at the start. Packets may
//!   enter at any node: [`NodeDistributor::distribute`] routes those of tags it owns to its
//!   workers, as [`Distributor::distribute`] does, and moves the others onto the bridge to
//!   their owner, one index publication per destination per call, or under load per
//!   batch gathered across calls (see [`NodeDistributor::set_batching`]).
//! * **Migration.** A node moves a bucket it owns to another node with
//!   [`NodeDistributor::migrate`] (to relieve an overloaded node): the other nodes switch
//!   at their next call, the new owner holds the bucket's packets until the old owner has
//!   finished every packet of it that reached it, then routes them, oldest first. Each
//!   flow keeps its order and every packet is processed once; no flow runs at two nodes at
//!   once. The ownership map is shared under crossbeam-epoch and read once per call.
//! * **Balancing.** With [`NodeDistributor::set_balance`] a node decides itself: when its
//!   workers stay out of credit while another balancing node's have room, it migrates the
//!   bucket whose packets at its workers weigh closest to half the difference
//!   ([`BalancePolicy`]).
//! * **Order.** Packets of one flow that enter at one node are processed in the order they
//!   entered: they all take the same path (that node's workers, or one bridge, which is a
//!   FIFO, then the owner's distributor, which keeps each source's order). For a flow that
//!   enters at two nodes, each entry's packets keep their order; how the two sequences
//!   interleave is not specified (as for two threads feeding one distributor in turns).
//!   A reschedule into a flow goes after the packets of that flow already waiting at its
//!   owner (come over a bridge, or released by a handover, and waiting for credit) and
//!   before any that arrive later. The packets a handover held at the new owner are
//!   released in the order that node read them, whichever node they came from. The
//!   reschedules one flow's packets make into another flow reach it in the order they
//!   were made, also when either flow's bucket migrates meanwhile. Packets of one flow
//!   that wait at its owner after coming over different bridges are placed in the order
//!   they were read.
//! * **Exactly once.** Every packet comes back once: processed, at its owner's
//!   [`collect`](NodeDistributor::collect) (or counted as dropped or lost there); or
//!   unplaced, to a caller of [`distribute`](NodeDistributor::distribute) (its own input
//!   that found no room; at a node without workers, also the packets of its flows that
//!   came over the bridges; reschedules for a node that was dropped). A worker's
//!   reschedule to a tag another node owns goes over the bridge to that node, ahead of
//!   any packet of that flow that enters here in a later call (the workers' hand-backs
//!   are read before the input is split up).
//! * **Backpressure.** A full bridge (or a local worker without credit) leaves packets with
//!   the caller: that packet and every later packet for the same destination in the burst
//!   (so each flow's order holds on the retry); under load a batch per destination may
//!   wait in the node for its bridge, as for a local worker. Packets that came over a bridge and cannot
//!   be placed yet wait in the receiving node, which then reads no more from that bridge
//!   until they are placed: the bridge fills and the sending node's caller keeps its
//!   packets.
//! * **Flush.** [`NodeDistributor::flush`] returns once every packet that entered any node
//!   has come back (collected, dropped or lost), so the nodes' threads flush together.
//!   Each node keeps two counts on a line of its own (packets entered here, packets
//!   finished here) and a flag, written by its thread when they changed (at most once
//!   per bridge push and once at the end of a call) and read by the others only while
//!   they flush.
//!
//! Cross-node lines written per call: per destination whose batch went out, the bridge's
//! packet lines and **one** index line (its tail); per source read, **one** index line (its
//! head, released by the burst read); plus the node's own progress line when its counts
//! changed (stores to a line read by nobody while nobody flushes: no transfer).

use core::fmt;
use std::sync::Arc;

mod admission;
mod balance;
mod bridges;
mod config;
mod distribute;
mod migration;
mod quiescence;
mod waits;

pub use super::ownership::{bucket_of, BUCKETS};
use super::ownership::{default_owner, Ownership, SharedMap};
use super::stats::{DROPPED, LOST};
use super::{Atomic, BoxTag, Config, Distributor, Worker};
use crate::fifo::spsc;
use crate::wait::Sleepers;
pub use admission::NodeAdmission;
use balance::Balancer;
pub use balance::{BadPolicy, BalancePolicy};
pub use config::{NodesConfig, NodesError, MAX_NODES};
use crossbeam_utils::CachePadded;
pub(crate) use quiescence::Quiescence;

/// The node that owns flow `tag` in a layout of `nodes` nodes (`nodes >= 1`) before any
/// migration: the buckets ([`bucket_of`]) split evenly between the nodes, so neighbouring
/// tags land on different nodes. [`NodeDistributor::owner`] gives the current owner.
///
/// ```
/// use flowline::distributor::nodes::owner_of;
/// assert_eq!(owner_of(42, 1), 0);
/// assert!(owner_of(42, 2) < 2);
/// let on_0 = (0..1000).filter(|&t| owner_of(t, 2) == 0).count();
/// assert!((400..600).contains(&on_0));
/// ```
#[inline]
#[must_use]
pub fn owner_of(tag: u64, nodes: usize) -> usize {
    default_owner(bucket_of(tag), nodes)
}

/// Packets that crossed this node's bridges (see [`NodeDistributor::bridge_stats`]).
///
/// ```
/// let s = flowline::distributor::nodes::BridgeStats::default();
/// assert_eq!(s.sent, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BridgeStats {
    /// Packets pushed onto bridges to other nodes.
    pub sent: u64,
    /// Publications on those bridges (each one write of a bridge's index line).
    pub bursts: u64,
    /// Packets read from bridges from other nodes.
    pub received: u64,
    /// Bucket migrations out of this node whose handover completed
    /// ([`NodeDistributor::migrate`]).
    pub migrations: u64,
    /// Packets that waited at this node for the end of a handover into it (the packets a
    /// migration delayed).
    pub held: u64,
    /// Migrations out of this node that its balance policy started
    /// ([`NodeDistributor::set_balance`]); also counted in `migrations` once their
    /// handover completed.
    pub rebalances: u64,
}

/// One node's distributor: see the [module documentation](self). Used by one thread (the
/// node's distributor thread, best pinned to a CPU of that node).
pub struct NodeDistributor<T, F = BoxTag<T>> {
    id: usize,
    nodes: usize,
    dist: Distributor<T, Atomic<F, NodeAdmission<T>>>,
    tag: F,
    /// Bridge to node `o` (`None` at `id`).
    out: Vec<Option<spsc::Producer<T>>>,
    /// Bridge from node `s` (`None` at `id`).
    inb: Vec<Option<spsc::Consumer<T>>>,
    /// Where node `o` waits (`None` at `id`): a push onto the bridge to `o` notifies it.
    wake_out: Vec<Option<Arc<CachePadded<Sleepers>>>>,
    /// Reschedules for node `o` its bridge had no room for: they go before any new input
    /// for `o`.
    pending_out: Vec<Vec<T>>,
    /// Input for node `o` (entered here) gathered across calls under load and pushed onto
    /// its bridge as a batch: when there is a batch of it, when the oldest waited the
    /// hold, in a call with less than a batch of input, before any reschedule for `o`
    /// (which must go after it), and before this node adopts a new map version (every
    /// packet it sent by the older version must be on the bridges then).
    staged_out: Vec<Vec<T>>,
    /// Per destination: the call at whose end its oldest staged packet was first left
    /// staged (`u64::MAX`: none).
    staged_out_call: Vec<u64>,
    /// Packets read from the bridge from node `s` that the local workers had no credit
    /// for yet, in arrival order.
    inbound: Vec<Vec<T>>,
    /// Per source: the poll of the local distributor's return rings (its `epoch`) after
    /// which the bridge's packets in `inbound[s]` arrived (a bridge is read only into an
    /// empty queue, so they arrived together). `inbound[id]` holds the packets handovers
    /// released, from every source, in the order this node read them: they arrived before
    /// any reschedule now in the backlog (arrival 0), and the other queues' packets of
    /// their flows wait behind them.
    inbound_at: Vec<u64>,
    /// This call's input for node `o`, in order (`id`: the local share, which a panic may
    /// leave here for the next call).
    sorted: Vec<Vec<T>>,
    /// New input for full (or dropped) bridges, going back to the caller at the end of
    /// the call (or by `give_back` if it panics). Never entered.
    back: Vec<T>,
    /// Reschedules and staged input for dropped nodes: they had entered; counted as
    /// finished when handed to a caller (or dropped with this node).
    undeliverable: Vec<T>,
    tags: Vec<u64>,
    progress: Quiescence,
    /// This node's counts (published to `progress` when they change).
    entered: u64,
    finished: u64,
    /// The distributor's dropped + lost counts already added to `finished`.
    seen_gone: u64,
    /// As published in `progress` (this node's `flushing` flag).
    flushing: bool,
    stats: BridgeStats,
    /// The ownership map all nodes share; this node's copy is its admission's.
    map: Arc<SharedMap>,
    /// Packets of buckets migrating into this node whose old owner has not finished
    /// yet, from every source (bridges, input entered here, reschedules read here), each
    /// with the key of when this node read it ([`hold_key`]): each source's in order.
    held: Vec<(u64, T)>,
    /// Whether a handover into this node is pending (the copy says so).
    holding: bool,
    /// Packets read from the bridge from node `s`, ever.
    read_from: Vec<u64>,
    /// Packets pushed onto the bridge to node `o`, ever.
    pushed_to: Vec<u64>,
    /// `pushed_to[o]` just after the last reschedule pushed onto the bridge to node `o`:
    /// once node `o` has read that many, it has every reschedule this node sent it.
    resched_end: Vec<u64>,
    /// The map version this node has adopted (published in `progress`), and the one for
    /// which it last looked at its held packets: both catch up with its copy's version
    /// in `refresh_map`.
    adopted: u64,
    released: u64,
    /// The migration out of this node in progress, if any.
    drain: Option<Drain>,
    /// The balance policy's state, when balancing ([`NodeDistributor::set_balance`]).
    balancer: Option<Balancer>,
    /// The backlog a step that found no worker took out (leavers' hand-backs, older than
    /// anything waiting here, and reschedules): it goes back to the caller in the same
    /// call, merged with what waits here. Empty between calls.
    no_workers_backlog: Vec<T>,
    /// In step with `no_workers_backlog`: the poll that read each (0: a leaver's hand-back).
    no_workers_at: Vec<u64>,
}

/// A bucket migrating out of this node: what its handover still waits for.
#[derive(Debug)]
struct Drain {
    bucket: usize,
    /// The map version that gave the bucket to its new owner.
    version: u64,
    /// The last poll of the return rings whose reschedules were looked at for the bucket
    /// ([`divert_draining`](NodeDistributor::divert_draining)); at the start, the last poll
    /// before the migration.
    scanned: u64,
    phase: Phase,
}

#[derive(Debug)]
enum Phase {
    /// Until every other node routes by `version` (or later): until then some may still
    /// send the bucket's packets here.
    Adoption,
    /// Until this node has read, per source, the packets that source sent before it
    /// adopted (`read_from` reaching these counts), and none of the bucket's packets waits
    /// here unrouted.
    Bridges(Vec<u64>),
    /// Until each worker has completed what it had been sent (these counts) when the
    /// phase began; then the flow table says whether a packet of the bucket is still at a
    /// worker (a reschedule into the bucket routed here since): if one is, the phase
    /// starts again. The counts spare the table scan on every call.
    Workers(Vec<u64>),
    /// Until every other node has read, off this node's bridge to it, the reschedules this
    /// node sent it up to now (`pushed_to` reaching these counts; reschedules still
    /// waiting for bridge room count as sent): those its workers made from the bucket's
    /// packets too. A reschedule into flow `g` made here before the handover ends then
    /// waits at `g`'s owner already (a reader keeps a reschedule that it reads later
    /// behind what waits there, invariant 4), so one made from a later packet of the
    /// same flow at the new owner cannot overtake it; it could while still on a bridge
    /// or in `pending_out`. Nothing of the bucket reaches the workers here any more (the
    /// other phases are done, and reschedules into it go to its new owner).
    Delivery(Vec<u64>),
}

/// A migration that cannot start ([`NodeDistributor::migrate`]).
///
/// ```
/// use flowline::distributor::nodes::{self, MigrateError, NodesConfig};
/// let c = NodesConfig::default().nodes(2).workers_per_node(1).credit(8).bridge(8);
/// let (mut n0, _w) = nodes::new(c, |p: &u64| *p).unwrap().remove(0);
/// assert_eq!(n0.migrate(0, 0), Err(MigrateError::SameNode));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigrateError {
    /// The bucket number is not below [`BUCKETS`].
    NoSuchBucket(usize),
    /// The node number is not below the layout's node count.
    NoSuchNode(usize),
    /// The bucket would move to the node it is on.
    SameNode,
    /// This node does not own the bucket now (or a handover into it is still pending).
    NotOwner,
    /// A migration out of this node is still in progress: one at a time per node.
    Busy,
    /// The destination node was dropped.
    NodeGone,
}

impl fmt::Display for MigrateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MigrateError::NoSuchBucket(b) => {
                write!(f, "bucket {b} does not exist; buckets are 0..{BUCKETS}")
            }
            MigrateError::NoSuchNode(n) => write!(f, "node {n} is not in this layout"),
            MigrateError::SameNode => write!(f, "the bucket is already on that node"),
            MigrateError::NotOwner => write!(
                f,
                "this node does not own the bucket (or its handover here is not finished); \
                 migrate it from its owner"
            ),
            MigrateError::Busy => write!(
                f,
                "a migration out of this node is in progress; call distribute until \
                 migrating() is false, then start the next"
            ),
            MigrateError::NodeGone => write!(f, "the destination node was dropped"),
        }
    }
}

impl std::error::Error for MigrateError {}

/// Builds the layout: for each node, its [`NodeDistributor`] and its workers, in node order.
///
/// # Errors
///
/// [`NodesError`] for zero or too many nodes, a bridge size out of range, or a node
/// configuration [`super::new`] refuses.
///
/// ```
/// use flowline::distributor::nodes::{self, NodesConfig, NodesError};
/// use flowline::distributor::ConfigError;
/// let c = NodesConfig::default().nodes(2).workers_per_node(0).credit(8).bridge(8);
/// assert_eq!(nodes::new(c, |p: &u64| *p).err(), Some(NodesError::Distributor(ConfigError::ZeroWorkers)));
/// ```
#[allow(clippy::type_complexity)]
pub fn new<T, F>(
    config: NodesConfig,
    tag: F,
) -> Result<Vec<(NodeDistributor<T, F>, Vec<Worker<T>>)>, NodesError>
where
    F: FnMut(&T) -> u64 + Clone,
{
    build(config, || tag.clone())
}

/// [`new`] with the tag function shared by the nodes and boxed for each ([`BoxTag`]): the
/// nodes' type is `NodeDistributor<T>`, which a struct can hold as it is.
///
/// # Errors
///
/// As [`new`].
///
/// ```
/// use flowline::distributor::nodes::{self, NodeDistributor, NodesConfig};
/// struct Node {
///     dist: NodeDistributor<u64>,
/// }
/// let c = NodesConfig::default().nodes(2).workers_per_node(1).credit(8).bridge(8);
/// let nodes: Vec<Node> = nodes::new_boxed(c, |p: &u64| *p)
///     .unwrap()
///     .into_iter()
///     .map(|(dist, _workers)| Node { dist })
///     .collect();
/// assert_eq!(nodes[1].dist.id(), 1);
/// ```
#[allow(clippy::type_complexity)]
pub fn new_boxed<T: 'static>(
    config: NodesConfig,
    tag: impl Fn(&T) -> u64 + Send + Sync + 'static,
) -> Result<Vec<(NodeDistributor<T>, Vec<Worker<T>>)>, NodesError> {
    let tag = Arc::new(tag);
    build(config, || {
        let tag = Arc::clone(&tag);
        Box::new(move |p: &T| tag(p)) as BoxTag<T>
    })
}

/// A node's bridge ends, for each other node (`None` for itself).
type BridgeEnds<E> = Vec<Vec<Option<E>>>;

/// The bridges of `n` nodes, each of `slots` packets: the producers by `[from][to]`, the
/// consumers by `[to][from]`.
#[allow(clippy::type_complexity)]
fn bridges<T>(
    n: usize,
    slots: usize,
) -> Result<(BridgeEnds<spsc::Producer<T>>, BridgeEnds<spsc::Consumer<T>>), NodesError> {
    let mut tx: BridgeEnds<spsc::Producer<T>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    let mut rx: BridgeEnds<spsc::Consumer<T>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    for from in 0..n {
        for to in 0..n {
            if from != to {
                let (p, mut c) = spsc::channel(slots).map_err(NodesError::Bridge)?;
                // A node's distributor polls its inputs and bridges in turn: no pauses.
                c.set_polite(crate::fifo::spsc::PolitePolling::Off);
                tx[from][to] = Some(p);
                rx[to][from] = Some(c);
            }
        }
    }
    Ok((tx, rx))
}

/// [`new`] with a tag function for each distributor and node from `make_tag`.
#[allow(clippy::type_complexity)]
fn build<T, F>(
    config: NodesConfig,
    mut make_tag: impl FnMut() -> F,
) -> Result<Vec<(NodeDistributor<T, F>, Vec<Worker<T>>)>, NodesError>
where
    F: FnMut(&T) -> u64,
{
    let n = config.nodes;
    if n == 0 {
        return Err(NodesError::NoNodes);
    }
    if n > MAX_NODES {
        return Err(NodesError::TooManyNodes(n));
    }
    let (tx, rx) = bridges(n, config.bridge)?;
    let progress = Quiescence::new(n);
    let map = Arc::new(SharedMap::new(n));
    let mut layout = Vec::with_capacity(n);
    for (id, (out, inb)) in tx.into_iter().zip(rx).enumerate() {
        let admit = NodeAdmission::new(map.local(id));
        let (dist, workers) = Distributor::build(
            Config {
                workers: config.workers_per_node,
                credit: config.credit,
            },
            Atomic::with_admission(make_tag(), admit),
        )
        .map_err(NodesError::Distributor)?;
        layout.push((
            NodeDistributor {
                id,
                nodes: n,
                dist,
                tag: make_tag(),
                out,
                inb,
                pending_out: (0..n).map(|_| Vec::new()).collect(),
                staged_out: (0..n).map(|_| Vec::new()).collect(),
                staged_out_call: vec![u64::MAX; n],
                inbound: (0..n).map(|_| Vec::new()).collect(),
                inbound_at: vec![0; n],
                wake_out: Vec::new(),
                sorted: (0..n).map(|_| Vec::new()).collect(),
                back: Vec::new(),
                undeliverable: Vec::new(),
                tags: Vec::new(),
                progress: progress.share(),
                entered: 0,
                finished: 0,
                seen_gone: 0,
                flushing: false,
                stats: BridgeStats::default(),
                map: Arc::clone(&map),
                held: Vec::new(),
                holding: false,
                read_from: vec![0; n],
                pushed_to: vec![0; n],
                resched_end: vec![0; n],
                adopted: 0,
                released: 0,
                drain: None,
                balancer: None,
                no_workers_backlog: Vec::new(),
                no_workers_at: Vec::new(),
            },
            workers,
        ));
    }
    wire_wakes(&mut layout);
    Ok(layout)
}

/// Tells each node where the others wait, for its bridges to wake them.
#[allow(clippy::type_complexity)]
fn wire_wakes<T, F>(layout: &mut [(NodeDistributor<T, F>, Vec<Worker<T>>)]) {
    let wakes: Vec<_> = layout
        .iter()
        .map(|(nd, _)| Arc::clone(nd.dist.wake()))
        .collect();
    for (nd, _) in layout.iter_mut() {
        let id = nd.id;
        nd.wake_out = (0..wakes.len())
            .map(|o| (o != id).then(|| Arc::clone(&wakes[o])))
            .collect();
    }
}

impl<T, F> NodeDistributor<T, F>
where
    F: FnMut(&T) -> u64,
{
    /// This node's number, `0..nodes`.
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(2).workers_per_node(1).credit(8).bridge(8);
    /// let layout = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap();
    /// assert_eq!(layout[1].0.id(), 1);
    /// ```
    pub fn id(&self) -> usize {
        self.id
    }

    /// Whether this node owns flow `tag` now ([`owner_of`] until a migration moves its
    /// bucket).
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(2).workers_per_node(1).credit(8).bridge(8);
    /// let layout = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap();
    /// assert!(layout[0].0.owns(7) != layout[1].0.owns(7));
    /// ```
    pub fn owns(&self, tag: u64) -> bool {
        self.owner(tag) == self.id
    }

    /// The node that owns flow `tag` now, by this node's copy of the ownership map (as of
    /// its last call): where packets of `tag` entering here go.
    ///
    /// ```
    /// use flowline::distributor::nodes::{self, owner_of, NodesConfig};
    /// let c = NodesConfig::default().nodes(2).workers_per_node(1).credit(8).bridge(8);
    /// let layout = nodes::new(c, |p: &u64| *p).unwrap();
    /// assert_eq!(layout[0].0.owner(7), owner_of(7, 2));
    /// ```
    pub fn owner(&self, tag: u64) -> usize {
        self.ownership().owner(tag)
    }

    fn ownership(&self) -> &Ownership {
        &self.dist.admission().ownership
    }

    /// Packets this node holds: at its workers, in its distributor's backlog, and waiting
    /// here for a bridge, for local credit, or for the end of a handover into this node.
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(1).workers_per_node(1).credit(8).bridge(8);
    /// let (mut n, _ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// n.distribute(&mut vec![1, 2]).unwrap();
    /// assert_eq!(n.held(), 2);
    /// ```
    pub fn held(&self) -> usize {
        self.dist.in_flight()
            + self.dist.admission().exported.len()
            + self.pending_out.iter().map(Vec::len).sum::<usize>()
            + self.staged_out.iter().map(Vec::len).sum::<usize>()
            + self.inbound.iter().map(Vec::len).sum::<usize>()
            + self.held.len()
            + self.undeliverable.len()
    }

    /// This node's distributor, for its statistics and worker control
    /// ([`Distributor::rejoin`], [`Distributor::stats`], ...). Routing through it directly
    /// would bypass the ownership of flows, so it is shared, not mutable, except through
    /// [`rejoin`](Self::rejoin).
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(1).workers_per_node(3).credit(8).bridge(8);
    /// let (n, _ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// assert_eq!(n.distributor().active_workers(), 3);
    /// ```
    pub fn distributor(&self) -> &Distributor<T, Atomic<F, NodeAdmission<T>>> {
        &self.dist
    }

    /// A new handle for this node's worker `id`, which left earlier (as
    /// [`Distributor::rejoin`]).
    ///
    /// # Errors
    ///
    /// As [`Distributor::rejoin`].
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(1).workers_per_node(1).credit(8).bridge(8);
    /// let (mut n, mut ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// ws.pop().unwrap().leave(Vec::new()).unwrap();
    /// n.distribute(&mut Vec::new()).unwrap_err(); // reads the leave
    /// assert!(n.rejoin(0).is_ok());
    /// ```
    pub fn rejoin(&mut self, id: usize) -> Result<Worker<T>, super::JoinError> {
        self.dist.rejoin(id)
    }

    /// Adds a worker to this node at run time (as [`Distributor::add_worker`]): it takes
    /// this node's flows from the next call on. Pin its thread to one of the node's CPUs
    /// if the layout is pinned. The node's worker registry is
    /// `self.distributor().registry()`.
    ///
    /// # Errors
    ///
    /// As [`Distributor::add_worker`].
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(1).workers_per_node(1).credit(8).bridge(8);
    /// let (mut n, _ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// let w = n.add_worker().unwrap();
    /// assert_eq!((w.id(), n.distributor().registry().active()), (1, 2));
    /// ```
    pub fn add_worker(&mut self) -> Result<Worker<T>, super::ConfigError> {
        self.dist.add_worker()
    }

    /// Removes this node's worker `id`, which left, for good (as
    /// [`Distributor::remove_worker`]).
    ///
    /// # Errors
    ///
    /// As [`Distributor::remove_worker`].
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(1).workers_per_node(2).credit(8).bridge(8);
    /// let (mut n, mut ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// ws.pop().unwrap().leave(Vec::new()).unwrap();
    /// n.remove_worker(1).unwrap();
    /// assert_eq!(n.distributor().registry().workers().len(), 1);
    /// ```
    pub fn remove_worker(&mut self, id: usize) -> Result<(), super::JoinError> {
        self.dist.remove_worker(id)
    }
}

impl<T, F> Drop for NodeDistributor<T, F> {
    /// The packets this node still holds (at its workers, in its backlog, waiting for a
    /// bridge or for credit, or in the bridges to it) are dropped with it, and counted as
    /// finished so that the other nodes' flushes can end; the node counts as flushing from
    /// now on. Packets other nodes push onto its bridges later stay with their callers
    /// (its bridges are abandoned). Drop a node only when no node will send it anything
    /// more: after every node's `flush` returned, before any takes new input. A node
    /// dropped while another is pushing onto its bridge may miss that burst (it is freed
    /// with the ring, uncounted), and the other nodes' flushes then end only by their
    /// timeout.
    fn drop(&mut self) {
        // `back` and `sorted` are empty between calls.
        let mut gone = self.dist.admission().exported.len()
            + self.pending_out.iter().map(Vec::len).sum::<usize>()
            + self.staged_out.iter().map(Vec::len).sum::<usize>()
            + self.inbound.iter().map(Vec::len).sum::<usize>()
            + self.held.len()
            + self.undeliverable.len();
        // A handover out of this node ends with it, so the new owner does not hold the
        // bucket's packets for ever; and it sends nothing more, so no migration waits for
        // it to adopt a map. What it held counts as finished (below). If its workers were
        // still processing packets of the bucket (a node dropped before its flush
        // returned, against the docs above), the new owner may now run those flows too.
        if self.drain.take().is_some() {
            self.map.finish(self.id, |_| true);
        }
        self.progress.adopt(self.id, u64::MAX);
        self.progress.set_load(self.id, None);
        // Taken out of the bridges, not dropped yet: the packets' `Drop` (user code) runs
        // after the final counts and the flushing mark are published, so one that panics
        // leaves no other node's flush waiting.
        let mut inbound_left = Vec::new();
        for rx in self.inb.iter_mut().flatten() {
            gone += rx.pop_burst_with(usize::MAX, |p| inbound_left.push(p));
        }
        // At the workers: sent and not yet handed back (`cursor` counts every hand-back
        // read, also while a leave freezes `completed`), plus unprocessed packets a
        // leaving worker handed back; drops and reschedules read are in `counted` and
        // the backlog.
        let held = self.dist.held_at_workers();
        let v = self.dist.counts();
        let counted = v[DROPPED] + v[LOST];
        let total = self.finished
            + (counted - self.seen_gone)
            + gone as u64
            + held
            + self.dist.backlog_len() as u64
            + self.dist.returned_len() as u64;
        self.progress.publish(self.id, self.entered, total);
        self.progress.set_flushing(self.id, true);
        drop(inbound_left);
    }
}

impl<T, F> fmt::Debug for NodeDistributor<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeDistributor")
            .field("id", &self.id)
            .field("nodes", &self.nodes)
            .field("entered", &self.entered)
            .field("finished", &self.finished)
            .field("bridges", &self.stats)
            .finish()
    }
}
