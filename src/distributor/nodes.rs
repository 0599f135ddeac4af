//! One distributor per NUMA node, bridged by SPSC rings that move bursts between nodes.
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
//!
//! ```
//! use flowline::distributor::nodes::{self, NodesConfig};
//!
//! // Two nodes, one worker each; packets are (flow, sequence) and the flow is the tag.
//! let cfg = NodesConfig { nodes: 2, workers_per_node: 1, credit: 64, bridge: 256 };
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

use core::fmt;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::balance::{pick_bucket, Balancer};
pub use super::balance::{BadPolicy, BalancePolicy};
pub use super::ownership::{bucket_of, BUCKETS};
use super::ownership::{default_owner, Ownership, SharedMap};
use super::{
    new as new_distributor, Config, ConfigError, Distributor, FlushError, NoWorkers, Worker,
    DROPPED, LOST,
};
use crate::fifo::spsc;
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::Backoff;

/// The most nodes one layout has.
///
/// ```
/// assert_eq!(flowline::distributor::nodes::MAX_NODES, 64);
/// ```
pub const MAX_NODES: usize = 64;

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
pub fn owner_of(tag: u64, nodes: usize) -> usize {
    default_owner(bucket_of(tag), nodes)
}

/// The layout's shape.
///
/// ```
/// let c = flowline::distributor::nodes::NodesConfig { nodes: 2, workers_per_node: 4, credit: 256, bridge: 1024 };
/// assert!(flowline::distributor::nodes::new(c, |p: &u64| *p).is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodesConfig {
    /// Number of nodes, 1 to [`MAX_NODES`] (the NUMA nodes of
    /// [`Topology::detect`](crate::topology::Topology::detect), or simulated ones).
    pub nodes: usize,
    /// Workers of each node's distributor (as [`Config::workers`]).
    pub workers_per_node: usize,
    /// Each worker's credit (as [`Config::credit`]).
    pub credit: usize,
    /// Slots of each bridge ring (rounded up to a power of two; at least 1, at most what
    /// [`spsc::channel`] accepts): how many packets may be on their way from one node to
    /// another.
    pub bridge: usize,
}

/// A layout that cannot be built.
///
/// ```
/// use flowline::distributor::nodes::{self, NodesConfig, NodesError};
/// let c = NodesConfig { nodes: 0, workers_per_node: 1, credit: 8, bridge: 8 };
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

/// A node's progress, on its own line: written by that node's thread only.
#[derive(Default)]
struct Progress {
    /// Packets that entered the layout here: input taken for the local workers (those
    /// given back unplaced count as finished too) or pushed onto a bridge.
    entered: AtomicU64,
    /// Packets that finished here: collected, dropped or lost, or given back on
    /// [`NoWorkers`] after having entered (at any node), or dropped with the node.
    finished: AtomicU64,
    /// The node's input has ended: it is in `flush` (and has not taken new input since),
    /// or it was dropped.
    flushing: AtomicBool,
    /// The version of the ownership map this node routes by (`u64::MAX` once dropped: it
    /// sends nothing more), stored at the start of a call, after every packet it sent by
    /// an older version is on its bridge.
    adopted: AtomicU64,
    /// The node's last sampled fill plus one (per-mille of its workers' credit in use), 0
    /// when unknown: it does not balance, has no active worker, or was dropped. Written
    /// once per balance period at most (only when it changed); read by the other
    /// balancing nodes once per period.
    load: AtomicU64,
}

/// The layout-wide quiescence check behind [`NodeDistributor::flush`]: one [`Progress`]
/// line per node.
///
/// The argument: counts only grow, and a packet is counted as entered (and published)
/// before any node can finish it, so the sum of `finished` never exceeds the sum of
/// `entered`. A checker that reads every node's `flushing` flag (all set: no node takes
/// new input, so the entered counts stay as they are), then every `finished`, then every
/// `entered`, and finds the sums equal, has seen an instant (between its finished and its
/// entered reads) at which every packet that had entered had finished. All accesses are
/// SeqCst, so they fall into one order with the nodes' stores.
pub(crate) struct Quiescence(Arc<[CachePadded<Progress>]>);

impl Quiescence {
    pub(crate) fn new(nodes: usize) -> Quiescence {
        Quiescence(
            (0..nodes)
                .map(|_| CachePadded::new(Progress::default()))
                .collect(),
        )
    }

    fn share(&self) -> Quiescence {
        Quiescence(Arc::clone(&self.0))
    }

    /// Node `node`'s counts, stored where they changed (only that node's thread calls
    /// this for `node`).
    pub(crate) fn publish(&self, node: usize, entered: u64, finished: u64) {
        let p = &self.0[node];
        // Relaxed loads: this thread is the only writer of its counts. SeqCst stores: see
        // the type's docs.
        if p.entered.load(Ordering::Relaxed) != entered {
            p.entered.store(entered, Ordering::SeqCst);
        }
        if p.finished.load(Ordering::Relaxed) != finished {
            p.finished.store(finished, Ordering::SeqCst);
        }
    }

    /// Node `node` routes by map version `v` from now on (only that node's thread calls
    /// this for `node`).
    pub(crate) fn adopt(&self, node: usize, v: u64) {
        // SeqCst (a Release would do): pairs with the load in `adopted`; this node's
        // bridge pushes by older versions come before it in its program order.
        self.0[node].adopted.store(v, Ordering::SeqCst);
    }

    /// The map version node `node` routes by (see [`adopt`](Self::adopt)).
    pub(crate) fn adopted(&self, node: usize) -> u64 {
        // SeqCst (an Acquire would do): pairs with `adopt`, so the bridge pushes node
        // `node` made before are visible to a read of its bridge's tail after this.
        self.0[node].adopted.load(Ordering::SeqCst)
    }

    /// Node `node`'s sampled fill (`None`: unknown), stored only if it changed (only that
    /// node's thread calls this for `node`).
    pub(crate) fn set_load(&self, node: usize, fill: Option<u32>) {
        let v = fill.map_or(0, |f| u64::from(f) + 1);
        // Relaxed: a load hint, not a synchronising flag; readers act on it only through
        // `migrate`, whose protocol does its own synchronisation. Assign-unless-equal
        // keeps the line shared while the value holds.
        crate::cell::AssignUnlessEqual::assign_unless_equal(
            &self.0[node].load,
            v,
            Ordering::Relaxed,
        );
    }

    /// Node `node`'s last sampled fill, if known.
    pub(crate) fn load(&self, node: usize) -> Option<u32> {
        // Relaxed: see `set_load`.
        match self.0[node].load.load(Ordering::Relaxed) {
            0 => None,
            v => Some((v - 1) as u32),
        }
    }

    /// Node `node`'s input has ended (`true`) or started again.
    pub(crate) fn set_flushing(&self, node: usize, on: bool) {
        // SeqCst: see the type's docs.
        self.0[node].flushing.store(on, Ordering::SeqCst);
    }

    /// Whether every node is flushing and every packet that entered has finished.
    pub(crate) fn idle(&self) -> bool {
        // SeqCst: see the type's docs. Flags first, then finished, then entered.
        if !self.0.iter().all(|p| p.flushing.load(Ordering::SeqCst)) {
            return false;
        }
        let finished: u64 = self
            .0
            .iter()
            .map(|p| p.finished.load(Ordering::SeqCst))
            .sum();
        let entered: u64 = self
            .0
            .iter()
            .map(|p| p.entered.load(Ordering::SeqCst))
            .sum();
        finished == entered
    }
}

/// Orders the packets a node holds for a handover by when it read them: a packet that
/// arrived (over a bridge, or as input) after poll `poll` of the return rings sorts after
/// the reschedules that poll read and before those of later polls (invariant 4: a
/// reschedule goes after what arrived before it, before what arrived after it). Polls are
/// counted in a `u64`; this doubles them, which would wrap only after 2^63 polls.
fn hold_key(poll: u64, reschedule: bool) -> u64 {
    (poll << 1) | u64::from(!reschedule)
}

/// One node's distributor: see the [module documentation](self). Used by one thread (the
/// node's distributor thread, best pinned to a CPU of that node).
pub struct NodeDistributor<T, F> {
    id: usize,
    nodes: usize,
    dist: Distributor<T, F>,
    tag: F,
    /// Bridge to node `o` (`None` at `id`).
    out: Vec<Option<spsc::Producer<T>>>,
    /// Bridge from node `s` (`None` at `id`).
    inb: Vec<Option<spsc::Consumer<T>>>,
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
    /// The ownership map all nodes share; this node's copy is `dist.ownership`.
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
/// let c = NodesConfig { nodes: 2, workers_per_node: 1, credit: 8, bridge: 8 };
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
/// let c = NodesConfig { nodes: 2, workers_per_node: 0, credit: 8, bridge: 8 };
/// assert_eq!(nodes::new(c, |p: &u64| *p).err(), Some(NodesError::Distributor(ConfigError::NoWorkers)));
/// ```
#[allow(clippy::type_complexity)]
pub fn new<T, F>(
    config: NodesConfig,
    tag: F,
) -> Result<Vec<(NodeDistributor<T, F>, Vec<Worker<T>>)>, NodesError>
where
    F: FnMut(&T) -> u64 + Clone,
{
    let n = config.nodes;
    if n == 0 {
        return Err(NodesError::NoNodes);
    }
    if n > MAX_NODES {
        return Err(NodesError::TooManyNodes(n));
    }
    // bridges[from][to]
    let mut tx: Vec<Vec<Option<spsc::Producer<T>>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    let mut rx: Vec<Vec<Option<spsc::Consumer<T>>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    for from in 0..n {
        for to in 0..n {
            if from != to {
                let (p, mut c) = spsc::channel(config.bridge).map_err(NodesError::Bridge)?;
                // A node's distributor polls its inputs and bridges in turn: no pauses.
                c.set_polite_polling(false);
                tx[from][to] = Some(p);
                rx[to][from] = Some(c);
            }
        }
    }
    let progress = Quiescence::new(n);
    let map = Arc::new(SharedMap::new(n));
    let mut layout = Vec::with_capacity(n);
    for (id, (out, inb)) in tx.into_iter().zip(rx).enumerate() {
        let (mut dist, workers) = new_distributor(
            Config {
                workers: config.workers_per_node,
                credit: config.credit,
            },
            tag.clone(),
        )
        .map_err(NodesError::Distributor)?;
        dist.ownership = Some(map.local(id));
        layout.push((
            NodeDistributor {
                id,
                nodes: n,
                dist,
                tag: tag.clone(),
                out,
                inb,
                pending_out: (0..n).map(|_| Vec::new()).collect(),
                staged_out: (0..n).map(|_| Vec::new()).collect(),
                staged_out_call: vec![u64::MAX; n],
                inbound: (0..n).map(|_| Vec::new()).collect(),
                inbound_at: vec![0; n],
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
    Ok(layout)
}

impl<T, F> NodeDistributor<T, F>
where
    F: FnMut(&T) -> u64,
{
    /// This node's number, `0..nodes`.
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 2, workers_per_node: 1, credit: 8, bridge: 8 };
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
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 2, workers_per_node: 1, credit: 8, bridge: 8 };
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
    /// let c = NodesConfig { nodes: 2, workers_per_node: 1, credit: 8, bridge: 8 };
    /// let layout = nodes::new(c, |p: &u64| *p).unwrap();
    /// assert_eq!(layout[0].0.owner(7), owner_of(7, 2));
    /// ```
    pub fn owner(&self, tag: u64) -> usize {
        self.ownership().owner(tag)
    }

    fn ownership(&self) -> &Ownership {
        self.dist.ownership.as_ref().expect("set by nodes::new")
    }

    /// Moves flow bucket `bucket` ([`bucket_of`]) from this node, which owns it, to node
    /// `to`, keeping every flow's order and every packet exactly once. The other nodes
    /// send the bucket's packets to `to` from the start of their next call; packets of the
    /// bucket that enter here stay with the caller (as for a full bridge) until the
    /// handover ends, and then go to `to`. Node `to` holds the bucket's packets until this
    /// node has finished the ones it has: the packets that every other node sent it
    /// before switching (counted off each bridge), those waiting in it, and those at its
    /// workers. Then it ends the handover and `to` routes them, oldest first (compare
    /// DPDK's dsw event device: pause, drain, unpause). The handover advances in this
    /// node's [`distribute`](Self::distribute) and [`flush`](Self::flush) calls (and
    /// needs the other nodes to keep calling theirs); [`migrating`](Self::migrating)
    /// says when it is over. One migration out of a node at a time. The handover waits
    /// until every worker of this node has completed what it held when the bucket's last
    /// packet was routed here, so a stalled worker here delays it (measured with no
    /// stall: `dist_2nodes_migrating` in the report); then until the other nodes have read
    /// the reschedules this node sent them (its workers' reschedules of the bucket's
    /// packets among them), so a node whose packets from here wait for its workers' credit
    /// delays it too. Reschedules into the bucket that this node's workers make meanwhile
    /// go to `to`, which holds them with the bucket's other packets.
    ///
    /// The ownership map is shared by the nodes and replaced at each step of a migration
    /// (crossbeam-epoch frees the versions no node reads any more); each node compares
    /// its private copy's version with the shared one once per call (one load of a line
    /// only migrations write) and copies the map only when it changed.
    ///
    /// # Errors
    ///
    /// [`MigrateError`]: a bucket or node out of range, the node itself, a bucket this
    /// node does not own, a migration still in progress here, or a dropped destination.
    ///
    /// # Panics
    ///
    /// If the user's `tag` panics while this call brings the node's copy of the map up
    /// to date (it re-sorts reschedules waiting for bridge room): before the new map is
    /// published nothing has changed; after it, the migration has started
    /// ([`migrating`](Self::migrating) says so) and goes on at the next calls.
    ///
    /// ```
    /// use flowline::distributor::nodes::{self, bucket_of, NodesConfig};
    /// let c = NodesConfig { nodes: 2, workers_per_node: 1, credit: 8, bridge: 8 };
    /// let mut layout = nodes::new(c, |p: &u64| *p).unwrap();
    /// let tag = (0..).find(|&t| layout[0].0.owns(t)).unwrap();
    /// layout[0].0.migrate(bucket_of(tag), 1).unwrap();
    /// assert_eq!(layout[0].0.owner(tag), 1);
    /// // Nothing of the bucket is in flight: the next calls end the handover.
    /// layout[1].0.distribute(&mut Vec::new()).unwrap();
    /// layout[0].0.distribute(&mut Vec::new()).unwrap();
    /// assert!(!layout[0].0.migrating());
    /// assert_eq!(layout[0].0.bridge_stats().migrations, 1);
    /// ```
    pub fn migrate(&mut self, bucket: usize, to: usize) -> Result<(), MigrateError> {
        if bucket >= BUCKETS {
            return Err(MigrateError::NoSuchBucket(bucket));
        }
        if to >= self.nodes {
            return Err(MigrateError::NoSuchNode(to));
        }
        if to == self.id {
            return Err(MigrateError::SameNode);
        }
        if self.drain.is_some() {
            return Err(MigrateError::Busy);
        }
        self.refresh_map();
        if !self.ownership().owns_bucket(bucket) {
            return Err(MigrateError::NotOwner);
        }
        if self.out[to]
            .as_ref()
            .is_some_and(spsc::Producer::is_abandoned)
        {
            return Err(MigrateError::NodeGone);
        }
        let version = self
            .map
            .start(bucket, self.id, to)
            .ok_or(MigrateError::NotOwner)?;
        self.drain = Some(Drain {
            bucket,
            version,
            scanned: self.dist.epoch,
            phase: Phase::Adoption,
        });
        self.refresh_map();
        Ok(())
    }

    /// Whether a migration out of this node is still in progress.
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 2, workers_per_node: 1, credit: 8, bridge: 8 };
    /// let layout = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap();
    /// assert!(!layout[0].0.migrating());
    /// ```
    pub fn migrating(&self) -> bool {
        self.drain.is_some()
    }

    /// Routes a burst that entered at this node: packets of flows this node owns to its
    /// workers, the others onto the bridges to their owners. Takes the packets it placed
    /// out of `pkts` and returns how many. Also moves packets that came over the bridges
    /// to the local workers, and reschedules to other nodes' tags onto their bridges, so
    /// call it (with an empty burst when there is no input) as often as
    /// [`collect`](Self::collect).
    ///
    /// Under load (a call bringing a batch of input or more: see
    /// [`set_batching`](Self::set_batching)), the packets for each other node are gathered
    /// across calls and pushed onto its bridge as a batch, as the local workers' are.
    ///
    /// Packets it cannot place stay in `pkts`, each group in order, so every flow's order
    /// holds on the retry: first those for the local workers (as
    /// [`Distributor::distribute`] leaves them), then packets for a node that was dropped
    /// (reschedules, and input staged for it in earlier calls), then those for each other
    /// node whose bridge was full, was dropped, or still holds reschedules waiting for
    /// room (those go first).
    ///
    /// # Errors
    ///
    /// [`NoWorkers`] if this node has no active worker: its own flows' packets are given
    /// back in `pkts` (those that came over the bridges first, with the backlog in front
    /// of the first source's or of the local ones, then the burst's); reschedules and
    /// packets for other nodes still go onto their bridges, reschedules first. Packets
    /// that came over a bridge and are given back here have left their path: re-fed
    /// after a worker rejoins, they may be processed after later packets of their flow
    /// that were still on the bridge.
    ///
    /// # Panics
    ///
    /// As [`Distributor::distribute`]. If `tag` (or the order check) panics, no packet is
    /// lost: the burst's packets not yet placed are back in `pkts`, and packets the node
    /// had taken in earlier calls stay in it.
    ///
    /// ```
    /// use flowline::distributor::nodes::{self, NodesConfig};
    /// let c = NodesConfig { nodes: 2, workers_per_node: 1, credit: 8, bridge: 8 };
    /// let mut layout = nodes::new(c, |p: &u64| *p).unwrap();
    /// let (mut n0, _w0) = layout.remove(0);
    /// let mut burst: Vec<u64> = (0..3).collect(); // light input: out at once
    /// assert_eq!(n0.distribute(&mut burst), Ok(3)); // some to local workers, some to node 1
    /// assert!(n0.bridge_stats().sent > 0);
    /// ```
    pub fn distribute(&mut self, pkts: &mut Vec<T>) -> Result<usize, NoWorkers> {
        /// Hands the packets of this call still held in the node back to the caller if
        /// user code (`tag`, the order check) panics, as `Distributor::distribute` does.
        struct GiveBack<'a, T, F: FnMut(&T) -> u64> {
            node: &'a mut NodeDistributor<T, F>,
            pkts: &'a mut Vec<T>,
        }
        impl<T, F: FnMut(&T) -> u64> Drop for GiveBack<'_, T, F> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.node.give_back(self.pkts);
                }
            }
        }
        let g = GiveBack { node: self, pkts };
        g.node.distribute_inner(g.pkts, true)
    }

    /// Gives the packets of this call that the node still holds back to the caller:
    /// local input not placed (counted as finished: it had entered), packets for full
    /// bridges, reschedules for dropped nodes (counted as finished now).
    fn give_back(&mut self, pkts: &mut Vec<T>) {
        let id = self.id;
        self.finished += (self.sorted[id].len() + self.undeliverable.len()) as u64;
        let mut v = core::mem::take(&mut self.undeliverable);
        v.append(&mut self.sorted[id]);
        v.append(&mut self.back);
        v.append(pkts);
        *pkts = v;
        self.publish();
    }

    /// `distribute`; with `give_back` false (`flush`), reschedules for dropped nodes stay
    /// in the node, uncounted as finished, so the flush does not end while they exist
    /// (the next `distribute` hands them back).
    fn distribute_inner(&mut self, pkts: &mut Vec<T>, give_back: bool) -> Result<usize, NoWorkers> {
        debug_assert!(
            self.back.is_empty() && self.sorted.iter().all(Vec::is_empty),
            "emptied by every call, also when it panics"
        );
        // The node's workers get their packets in batches while the caller brings a batch
        // of input or more, and everything at once in a call with less (every flush round
        // brings none).
        self.dist.begin_call(pkts.len());
        if self.flushing && !pkts.is_empty() {
            // New input: the other nodes' flushes wait for this node's again.
            self.flushing = false;
            self.progress.set_flushing(self.id, false);
        }
        // The ownership map as of now, for the whole call (and the adoption of a new
        // version, once everything sent by the old one is on the bridges).
        self.refresh_map();
        // The workers' hand-backs first: a reschedule read now (or by `collect` before)
        // goes out ahead of this call's input, to whichever node owns its new tag. `tag`
        // may panic in here: nothing has been taken from `pkts` yet.
        self.dist.poll_returns();
        self.divert_draining();
        self.refresh_behind();
        self.dist.route_polled();
        self.export_reschedules();
        // Reschedules waiting for room go first; a destination still blocked by them takes
        // no new input this call (its flows' order). Those for a node that was dropped go
        // back to the caller.
        let mut blocked = [false; MAX_NODES];
        for (o, blocked) in blocked.iter_mut().enumerate().take(self.nodes) {
            if !self.pending_out[o].is_empty() {
                // Input staged for `o` entered before these were read: it goes first.
                if !self.push_staged_out(o) {
                    *blocked = true;
                    continue;
                }
                let mut v = core::mem::take(&mut self.pending_out[o]);
                if self.push_bridge(o, &mut v, true) {
                    *blocked = !v.is_empty();
                } else {
                    // Node `o` was dropped: they go back to the caller (counted as finished
                    // when handed over).
                    self.undeliverable.append(&mut v);
                }
                self.pending_out[o] = v;
            }
        }
        // Tag the whole burst first: if `tag` panics, `pkts` is untouched.
        self.tags.clear();
        for p in pkts.iter() {
            self.tags.push((self.tag)(p));
        }
        // From here until the end every packet is in `self` (`sorted`, `back`, the
        // bridges, the distributor), so a panic below loses none: the next call goes on.
        let mut placed = 0usize;
        // A destination whose staged input did not all fit on its bridge takes no new
        // input either (those packets are left, with no call noted: see below).
        for (o, blocked) in blocked.iter_mut().enumerate().take(self.nodes) {
            *blocked |= self.staged_out_call[o] == u64::MAX && !self.staged_out[o].is_empty();
        }
        let own = self.dist.ownership.as_ref().expect("set by nodes::new");
        let draining = self.drain.is_some();
        for (p, &t) in pkts.drain(..).zip(&self.tags) {
            let o = own.owner(t);
            if o == self.id {
                // Counted as entered now; what the workers cannot take yet goes back to the
                // caller at the end, counted as finished. Packets of a bucket migrating
                // here wait until its old owner is done with it.
                self.entered += 1;
                if self.holding && own.held_here(t) {
                    // Taken from the caller: placed, for the caller's count. It entered
                    // after this call's poll (and the reschedules it read).
                    self.held.push((hold_key(self.dist.epoch, false), p));
                    self.stats.held += 1;
                    placed += 1;
                } else {
                    self.sorted[o].push(p);
                }
            } else if blocked[o] || (draining && own.routes_here(t)) {
                // A full destination; or a bucket migrating out of this node, whose new
                // input waits with the caller until the handover ends: this node may
                // still give older packets of it back to the caller (`NoWorkers`),
                // which must stay in front.
                self.back.push(p);
            } else {
                self.sorted[o].push(p);
            }
        }
        // Input for the other nodes is staged (entered now, and the count published before
        // any of it can reach another node), then each bridge's batch goes out.
        let mut fresh = [0usize; MAX_NODES];
        for (o, fresh) in fresh.iter_mut().enumerate().take(self.nodes) {
            if o == self.id || self.sorted[o].is_empty() {
                continue;
            }
            let mut v = core::mem::take(&mut self.sorted[o]);
            if self.out[o]
                .as_ref()
                .is_some_and(spsc::Producer::is_abandoned)
            {
                // Node `o` was dropped: back to the caller, never entered.
                self.back.append(&mut v);
            } else {
                *fresh = v.len();
                self.entered += v.len() as u64;
                placed += v.len();
                self.staged_out[o].append(&mut v);
            }
            self.sorted[o] = v;
        }
        self.publish();
        let (all, batch, hold, calls) = (
            self.dist.publish_all,
            self.dist.batch,
            self.dist.hold,
            self.dist.calls,
        );
        for (o, &fresh) in fresh.iter().enumerate().take(self.nodes) {
            let n = self.staged_out[o].len();
            if n == 0 {
                continue;
            }
            let since = self.staged_out_call[o];
            // Older packets left by a push that did not fit (no call noted) try again.
            let left_over = since == u64::MAX && n > fresh;
            // As for a lane: 0 for packets staged by this call.
            let age = if since == u64::MAX {
                0
            } else {
                calls.wrapping_sub(since)
            };
            let due = all || n as u64 >= batch || left_over || age >= hold;
            if !due {
                if since == u64::MAX {
                    self.staged_out_call[o] = calls;
                }
                continue;
            }
            self.push_staged_out(o);
            // A full bridge leaves this call's packets that did not fit with the caller
            // (in order, behind any older ones left here): entered, so counted as
            // finished, as local input the workers had no room for.
            let left = self.staged_out[o].len();
            let k = left.min(fresh);
            if k > 0 {
                let mut v = self.staged_out[o].split_off(left - k);
                self.finished += k as u64;
                placed -= k;
                self.back.append(&mut v);
            }
        }
        let r = self.pump_local();
        let r = r.and_then(|()| {
            let before = self.sorted[self.id].len();
            self.dist.poll_returns();
            self.divert_draining();
            self.refresh_behind();
            // Input of the flows whose released packets still wait for credit waits behind
            // them (back to the caller); the other flows go on.
            self.wait_behind_released();
            if self.dist.active_workers() == 0 {
                return Err(self.no_workers());
            }
            let res = self
                .dist
                .distribute_polled(&mut self.sorted[self.id], &mut 0, u64::MAX);
            self.dist.wait_first.clear();
            // Reschedules this last poll read for a bucket held here: queued now, before a
            // later call's release could let a newer one of their flow go first.
            self.export_reschedules();
            match res {
                Ok(n) => {
                    placed += n;
                    Ok(())
                }
                Err(NoWorkers) => {
                    debug_assert!(self.sorted[self.id].len() >= before, "all given back");
                    Err(NoWorkers)
                }
            }
        });
        if r.is_err() {
            // The flows this node owns cannot be placed here: what came over the bridges
            // goes back too, first (the backlog is at the front of the source that found
            // no worker, or of the local input), then the local input.
            // The released packets first: the other queues' packets of their flows are
            // newer.
            let id = self.id;
            // Merged by when this node read each, as the normal path orders them: a
            // leaver's hand-backs first (older than anything waiting here), then the
            // released queue, then reschedules and bridged packets by their polls (a
            // reschedule after what arrived before it was read).
            let mut keyed: Vec<((u64, u8), T)> = Vec::new();
            let at = core::mem::take(&mut self.no_workers_at);
            for (p, a) in self.no_workers_backlog.drain(..).zip(at) {
                keyed.push((
                    if a == 0 {
                        (0, 0)
                    } else {
                        (hold_key(a, true), 0)
                    },
                    p,
                ));
            }
            for p in self.inbound[id].drain(..) {
                keyed.push(((0, 1), p));
            }
            for s in (0..self.nodes).filter(|&s| s != id) {
                let k = hold_key(self.inbound_at[s], false);
                for p in self.inbound[s].drain(..) {
                    keyed.push(((k, 0), p));
                }
            }
            keyed.sort_by_key(|&(k, _)| k);
            self.finished += keyed.len() as u64;
            pkts.extend(keyed.into_iter().map(|(_, p)| p));
        }
        // Local packets not placed (with the backlog in front on `NoWorkers`): all had
        // entered, so going back to the caller they count as finished. Then reschedules
        // for dropped nodes (unless flushing), then packets for full bridges.
        self.finished += self.sorted[self.id].len() as u64;
        pkts.append(&mut self.sorted[self.id]);
        if give_back || r.is_err() {
            self.finished += self.undeliverable.len() as u64;
            pkts.append(&mut self.undeliverable);
        }
        pkts.append(&mut self.back);
        self.publish();
        if r.is_ok() {
            self.drive_drain();
            self.balance();
        }
        r.map(|()| placed)
    }

    /// Balancing, once per period of calls: samples this node's fill, publishes it, and
    /// moves a bucket to a node with room if this one has been loaded long enough (see
    /// [`BalancePolicy`]). One migration at a time: nothing while one out of this node or
    /// into it is in progress.
    fn balance(&mut self) {
        let Some(b) = self.balancer.as_mut() else {
            return;
        };
        if !b.tick() {
            return;
        }
        let fill = b.smooth(self.dist.fill_permille());
        self.progress.set_load(self.id, fill);
        let Some(own) = fill else { return };
        if self.drain.is_some() || self.holding {
            return;
        }
        let (id, progress) = (self.id, &self.progress);
        let others = (0..self.nodes)
            .filter(|&o| o != id)
            .filter_map(|o| progress.load(o).map(|f| (o, f)));
        let Some((to, gap)) = b.decide(own, others) else {
            return;
        };
        // Half the gap, in packets at this node's workers: the bucket to move should
        // weigh no more, or the overload just moves.
        let capacity = self.dist.active_workers() as u64 * self.dist.credit;
        let budget = capacity * u64::from(gap) / 2000;
        let own_map = self.ownership();
        let loads: Vec<(usize, u64)> = self
            .dist
            .in_flight_by_bucket()
            .into_iter()
            .filter(|&(bucket, _)| own_map.owns_bucket(bucket))
            .collect();
        if let Some(bucket) = pick_bucket(&loads, budget.max(1)) {
            if self.migrate(bucket, to).is_ok() {
                self.stats.rebalances += 1;
            }
        }
    }

    /// Turns load balancing on with `policy` (or off with `None`): this node then samples
    /// how full its workers are every `policy.period` calls of
    /// [`distribute`](Self::distribute), and when it has stayed loaded while another
    /// balancing node had room, migrates one bucket of its flows there
    /// ([`migrate`](Self::migrate), with its handover's order and exactly-once
    /// guarantees), the bucket whose packets at its workers weigh closest to half the
    /// difference. Only nodes that balance publish their load, so turn it on at every
    /// node. Costs: nothing per packet; per period, one scan of the workers' counts and
    /// one store and one load per other node of a line each; per decision, one pass over
    /// the packets at the workers. A node with a single hot flow (heavier than half the
    /// gap) keeps it: moving it would move the overload.
    ///
    /// # Errors
    ///
    /// [`BadPolicy`] for a field out of range ([`BalancePolicy::check`]); nothing changes.
    ///
    /// ```
    /// use flowline::distributor::nodes::{self, BalancePolicy, NodesConfig};
    /// let c = NodesConfig { nodes: 2, workers_per_node: 1, credit: 8, bridge: 8 };
    /// let mut layout = nodes::new(c, |p: &u64| *p).unwrap();
    /// for (node, _) in layout.iter_mut() {
    ///     node.set_balance(Some(BalancePolicy::default())).unwrap();
    /// }
    /// let bad = BalancePolicy { patience: 0, ..Default::default() };
    /// assert!(layout[0].0.set_balance(Some(bad)).is_err());
    /// ```
    pub fn set_balance(&mut self, policy: Option<BalancePolicy>) -> Result<(), BadPolicy> {
        if let Some(p) = &policy {
            p.check()?;
        }
        self.balancer = policy.map(Balancer::new);
        if self.balancer.is_none() {
            self.progress.set_load(self.id, None);
        }
        Ok(())
    }

    /// Moves the packets this node's workers handed back as processed onto `out`; returns
    /// how many (as [`Distributor::collect`]). They are this node's flows' packets, from
    /// whichever node they entered at.
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 1, workers_per_node: 1, credit: 8, bridge: 8 };
    /// let (mut n, mut ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// n.distribute(&mut vec![1, 2]).unwrap();
    /// let mut b = Vec::new();
    /// ws[0].recv_burst(&mut b, 8).unwrap();
    /// ws[0].done_burst(&mut b).unwrap();
    /// let mut out = Vec::new();
    /// assert_eq!(n.collect(&mut out), 2);
    /// ```
    pub fn collect(&mut self, out: &mut Vec<T>) -> usize {
        let n = self.dist.collect(out);
        self.finished += n as u64;
        self.publish();
        n
    }

    /// Drives the layout until every node is flushing too (or was dropped) and every packet
    /// that entered at any node has come back (collected at its owner, dropped or lost),
    /// collecting this node's onto `out`, or until `timeout` passes. So every node's thread
    /// flushes once its input ends, and each flush returns only when all input has ended
    /// and all packets are back: no node leaves while another still sends it packets. Spins with backoff, then naps of 50 us doubling to 1 ms while nothing
    /// moves. A `timeout` too large to add to the current time means no deadline.
    ///
    /// # Errors
    ///
    /// [`FlushError::Timeout`] (with the packets this node still holds) if `timeout`
    /// passed first; [`FlushError::NoWorkers`] (with its flows' packets) if this node has
    /// no active worker.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 1, workers_per_node: 1, credit: 8, bridge: 8 };
    /// let (mut n, _ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// n.distribute(&mut vec![1]).unwrap();
    /// let mut out = Vec::new();
    /// // Nobody runs the worker here, so the flush times out; the packet is not lost.
    /// assert!(n.flush(&mut out, Duration::from_millis(1)).is_err());
    /// ```
    pub fn flush(&mut self, out: &mut Vec<T>, timeout: Duration) -> Result<(), FlushError<T>> {
        let deadline = Instant::now().checked_add(timeout);
        let mut backoff = Backoff::new();
        let mut nap = Duration::from_micros(50);
        let mut empty = Vec::new();
        if !self.flushing {
            self.flushing = true;
            self.progress.set_flushing(self.id, true);
        }
        loop {
            let before = (self.entered, self.finished, self.stats);
            // Nothing but `NoWorkers` puts packets into `empty` (no input, and reschedules
            // for dropped nodes stay in the node, keeping the flush from ending).
            if self.distribute_inner(&mut empty, false).is_err() {
                self.collect(out);
                return Err(FlushError::NoWorkers(empty));
            }
            debug_assert!(empty.is_empty());
            self.collect(out);
            if self.progress.idle() {
                return Ok(());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(FlushError::Timeout {
                    in_flight: self.held(),
                    workers: self.dist.holding_workers(),
                });
            }
            if before != (self.entered, self.finished, self.stats) {
                backoff = Backoff::new();
                nap = Duration::from_micros(50);
            } else if !backoff.is_completed() {
                backoff.snooze();
            } else {
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(1));
            }
        }
    }

    /// Packets this node holds: at its workers, in its distributor's backlog, and waiting
    /// here for a bridge, for local credit, or for the end of a handover into this node.
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 1, workers_per_node: 1, credit: 8, bridge: 8 };
    /// let (mut n, _ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// n.distribute(&mut vec![1, 2]).unwrap();
    /// assert_eq!(n.held(), 2);
    /// ```
    pub fn held(&self) -> usize {
        self.dist.in_flight()
            + self.dist.exported.len()
            + self.pending_out.iter().map(Vec::len).sum::<usize>()
            + self.staged_out.iter().map(Vec::len).sum::<usize>()
            + self.inbound.iter().map(Vec::len).sum::<usize>()
            + self.held.len()
            + self.undeliverable.len()
    }

    /// Packets and publications on this node's bridges so far.
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 2, workers_per_node: 1, credit: 8, bridge: 8 };
    /// let (n, _ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// assert_eq!(n.bridge_stats(), Default::default());
    /// ```
    pub fn bridge_stats(&self) -> BridgeStats {
        self.stats
    }

    /// Sets how this node gathers packets before it publishes them, per local worker and
    /// per bridge: as [`Distributor::set_batching`], by the new input of this node's
    /// [`distribute`](Self::distribute) (a call with less than a batch, and every round of
    /// [`flush`](Self::flush), publishes everything). A bridge's batch also goes out
    /// before any reschedule for its node (which must follow it) and before this node
    /// adopts a new ownership map (a handover waits for it).
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 1, workers_per_node: 1, credit: 8, bridge: 8 };
    /// let (mut n, mut ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// n.set_batching(1, 0); // every call publishes what it routed
    /// n.distribute(&mut vec![5]).unwrap();
    /// assert_eq!(ws[0].recv_burst(&mut Vec::new(), 8), Ok(1));
    /// ```
    pub fn set_batching(&mut self, packets: usize, hold_calls: u32) {
        self.dist.set_batching(packets, hold_calls);
    }

    /// This node's distributor, for its statistics and worker control
    /// ([`Distributor::rejoin`], [`Distributor::stats`], ...). Routing through it directly
    /// would bypass the ownership of flows, so it is shared, not mutable, except through
    /// [`rejoin`](Self::rejoin).
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 1, workers_per_node: 3, credit: 8, bridge: 8 };
    /// let (n, _ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// assert_eq!(n.distributor().active_workers(), 3);
    /// ```
    pub fn distributor(&self) -> &Distributor<T, F> {
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
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 1, workers_per_node: 1, credit: 8, bridge: 8 };
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
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 1, workers_per_node: 1, credit: 8, bridge: 8 };
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
    /// let c = flowline::distributor::nodes::NodesConfig { nodes: 1, workers_per_node: 2, credit: 8, bridge: 8 };
    /// let (mut n, mut ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// ws.pop().unwrap().leave(Vec::new()).unwrap();
    /// n.remove_worker(1).unwrap();
    /// assert_eq!(n.distributor().registry().workers().len(), 1);
    /// ```
    pub fn remove_worker(&mut self, id: usize) -> Result<(), super::JoinError> {
        self.dist.remove_worker(id)
    }

    /// Moves reschedules the local distributor set aside (tags another node owns) to
    /// their owners' queues, in order. If `tag` panics they stay set aside.
    fn export_reschedules(&mut self) {
        if self.dist.exported.is_empty() {
            return;
        }
        self.tags.clear();
        for p in &self.dist.exported {
            self.tags.push((self.tag)(p));
        }
        let mut v = core::mem::take(&mut self.dist.exported);
        let mut at = core::mem::take(&mut self.dist.exported_at);
        self.requeue(&mut v, &at);
        // Empty again; their allocations go back for the next reschedules.
        at.clear();
        self.dist.exported = v;
        self.dist.exported_at = at;
    }

    /// Moves the packets of `v`, tagged in `self.tags` (in order), to the queues of their
    /// owners by this node's copy of the map: another node's bridge queue, or here the
    /// packets held for a handover into this node, or those routed here. Each queue keeps
    /// the packets' order. `read` gives the poll that read each reschedule (empty: before
    /// any packet now held). No user code runs here.
    fn requeue(&mut self, v: &mut Vec<T>, read: &[u64]) {
        let tags = core::mem::take(&mut self.tags);
        let own = self.dist.ownership.as_ref().expect("set by nodes::new");
        for (k, (p, &t)) in v.drain(..).zip(&tags).enumerate() {
            let o = own.owner(t);
            if o != self.id {
                self.pending_out[o].push(p);
            } else if own.held_here(t) {
                // A bucket migrating here: waits with its other packets.
                let r = read.get(k).copied().unwrap_or(0);
                self.held.push((hold_key(r, true), p));
                self.stats.held += 1;
            } else {
                // Its handover ended since it was set aside: routed here.
                self.inbound[o].push(p);
            }
        }
        self.tags = tags;
    }

    /// Pushes the front of `v` onto the bridge to `o` with one publication; what does not
    /// fit stays in `v`. Everything pushed has entered already (and its count was
    /// published); `resched` marks reschedules (see `resched_end`). The room is the
    /// producer's cached view of the other end, refreshed only when it says full. Returns
    /// false (and pushes nothing) if node `o` was dropped.
    fn push_bridge(&mut self, o: usize, v: &mut Vec<T>, resched: bool) -> bool {
        let mut tx = self.out[o].take().expect("a bridge to every other node");
        let open = !tx.is_abandoned();
        if open {
            let chunk = tx.write_chunk(v.len());
            let k = chunk.len();
            if k > 0 {
                let mut it = v.drain(..k);
                let n = chunk.fill_from_iter(&mut it);
                debug_assert_eq!(n, k, "the drain holds k packets");
                drop(it);
                self.stats.sent += k as u64;
                self.stats.bursts += 1;
                self.pushed_to[o] += k as u64;
                if resched {
                    self.resched_end[o] = self.pushed_to[o];
                }
            }
        }
        self.out[o] = Some(tx);
        open
    }

    /// Pushes the input staged for node `o` onto its bridge; returns whether none is left
    /// (what does not fit stays staged, in order). If node `o` was dropped, its staged
    /// input goes back to the caller (it had entered: counted as finished then).
    fn push_staged_out(&mut self, o: usize) -> bool {
        if self.staged_out[o].is_empty() {
            return true;
        }
        let mut v = core::mem::take(&mut self.staged_out[o]);
        if !self.push_bridge(o, &mut v, false) {
            self.undeliverable.append(&mut v);
        }
        self.staged_out_call[o] = u64::MAX;
        let done = v.is_empty();
        self.staged_out[o] = v;
        done
    }

    /// Places what waits here: first the packets handovers released (`inbound[id]`),
    /// then each bridge's, reading a bridge whose earlier packets are all placed. While
    /// released packets wait, the other queues' packets of their flows wait behind them.
    fn pump_local(&mut self) -> Result<(), NoWorkers> {
        let id = self.id;
        for s in core::iter::once(id).chain((0..self.nodes).filter(|&s| s != id)) {
            if s != id && self.inbound[s].is_empty() {
                let rx = self.inb[s]
                    .as_mut()
                    .expect("a bridge from every other node");
                let n = rx.pop_burst_into(&mut self.inbound[s], usize::MAX);
                self.inbound_at[s] = self.dist.epoch;
                self.stats.received += n as u64;
                self.read_from[s] += n as u64;
                if n > 0 {
                    // The sender may have routed them by a map version newer than this
                    // node's copy (a bucket migrating here whose packets must wait): its
                    // version store came before its push, so after reading the push one
                    // more load of the version finds it. A handover that ended may
                    // release packets into `inbound[id]` here: these are newer.
                    self.refresh_map();
                }
            }
            if self.holding && !self.inbound[s].is_empty() {
                self.divert_held(s);
            }
            if !self.inbound[s].is_empty() {
                // In place: if `tag` panics, what was not taken stays here. On `NoWorkers`
                // the backlog comes back in front of it; the caller hands it all back.
                // A reschedule read after packets of its flow arrived here goes after them
                // (`refresh_behind`), and these packets after a reschedule read before they
                // arrived.
                self.dist.poll_returns();
                self.divert_draining();
                self.refresh_behind();
                // (Set anew for every queue: a panic in the step before may have left it.)
                let (mut old, arrived) = if s == id {
                    self.dist.wait_first.clear();
                    (usize::MAX, 0)
                } else {
                    self.wait_behind_released();
                    self.wait_behind_earlier(s);
                    (0, self.inbound_at[s])
                };
                if self.dist.active_workers() == 0 {
                    return Err(self.no_workers());
                }
                let r = self
                    .dist
                    .distribute_polled(&mut self.inbound[s], &mut old, arrived);
                self.dist.wait_first.clear();
                r?;
                // Reschedules this step read for a bucket whose handover into this node
                // ended in the meantime: queued here now (after what waits here), before
                // a later step can read a newer one of the same flow.
                self.export_reschedules();
            }
        }
        Ok(())
    }

    /// No active worker here: sends the backlog's reschedules for other nodes (or held
    /// buckets) to their queues, takes the rest out with the polls that read it (to go
    /// back to the caller merged with what waits here, in the order it was read), and
    /// answers `NoWorkers`.
    fn no_workers(&mut self) -> NoWorkers {
        // Reschedules to other nodes' tags (or to buckets held here) go to their queues
        // first, as in a step with workers; `tag` may panic here, before anything is
        // taken out.
        self.dist.route_polled();
        self.export_reschedules();
        self.no_workers_backlog.extend(self.dist.backlog.drain(..));
        self.no_workers_at.extend(self.dist.backlog_at.drain(..));
        self.dist.wait_first.clear();
        NoWorkers
    }

    /// Tells the local distributor the flows of the released packets still waiting in
    /// `inbound[id]`, before it places another queue: their packets there are newer (see
    /// [`release_held`](Self::release_held)), and wait. If `tag` panics, the set is
    /// partial, and the queue is not placed in this step (the panic ends it).
    fn wait_behind_released(&mut self) {
        let Self {
            id,
            dist,
            inbound,
            tag,
            ..
        } = self;
        dist.wait_first.clear();
        for p in &inbound[*id] {
            dist.wait_first.insert(tag(p));
        }
    }

    /// Adds to `wait_first` the flows of the packets waiting in another bridge's queue
    /// that arrived before those of `inbound[s]` (by an earlier poll), before the node
    /// places `inbound[s]`: they go first. A flow whose bucket migrated from one node to
    /// another sends the reschedules it made into a flow owned by a third node over two
    /// bridges; those made at the old owner are read here before the handover ends
    /// ([`Phase::Delivery`]), so before any made at the new owner, and must not be
    /// overtaken by them while they wait for credit. If `tag` panics, the set is partial,
    /// and the queue is not placed in this step (the panic ends it).
    fn wait_behind_earlier(&mut self, s: usize) {
        let Self {
            id,
            dist,
            inbound,
            inbound_at,
            tag,
            ..
        } = self;
        for (o, q) in inbound.iter().enumerate() {
            if o != *id && o != s && inbound_at[o] < inbound_at[s] {
                for p in q {
                    dist.wait_first.insert(tag(p));
                }
            }
        }
    }

    /// Tells the local distributor which packets wait here to be placed (every `inbound`
    /// queue, with the poll after which it arrived), so that a reschedule read after
    /// them waits behind them. Only while the backlog holds something: otherwise there is
    /// nothing to hold back, and nothing is tagged. If `tag` panics, `behind` is partial:
    /// a reschedule may then go before one of them (the next step collects them again).
    fn refresh_behind(&mut self) {
        let Self {
            id,
            dist,
            inbound,
            inbound_at,
            tag,
            ..
        } = self;
        dist.behind.clear();
        if dist.backlog.is_empty() {
            return;
        }
        for (s, q) in inbound.iter().enumerate() {
            let arrived = if s == *id { 0 } else { inbound_at[s] };
            for p in q {
                let e = dist.behind.entry(tag(p)).or_insert(arrived);
                *e = (*e).min(arrived);
            }
        }
    }

    /// Sends the reschedules into the bucket migrating out of this node that the polls
    /// since the migration started read to its new owner (into `dist.exported`, in order,
    /// for `export_reschedules`), instead of to the workers here: that node holds them
    /// with the bucket's other packets until this node is done, and releases them in the
    /// order it read them. A reschedule into one of the bucket's flows, `g`, made at the
    /// new owner from a packet of flow `f` waits there until this node is done; if `f`'s
    /// bucket then moves here, a reschedule into `g` made here from a later packet of `f`
    /// must not run here before it. Packets a leaving worker handed back (read as 0) and
    /// reschedules read before the migration stay: they are older than anything of the
    /// bucket elsewhere. If `tag` panics, nothing has moved (and the next poll looks
    /// again).
    fn divert_draining(&mut self) {
        let Self {
            drain, dist, tag, ..
        } = self;
        let Some(d) = drain.as_mut() else {
            return;
        };
        if d.scanned >= dist.epoch {
            return;
        }
        // Tagged first: if `tag` panics, nothing has moved. Only the reschedules read
        // since the last look (the backlog keeps the order in which it was read).
        let mut hits = Vec::new();
        for (k, (p, &at)) in dist.backlog.iter().zip(&dist.backlog_at).enumerate() {
            if at > d.scanned && bucket_of(tag(p)) == d.bucket {
                hits.push(k);
            }
        }
        d.scanned = dist.epoch;
        if hits.is_empty() {
            return;
        }
        let mut next = hits.iter().copied().peekable();
        let mut keep = VecDeque::with_capacity(dist.backlog.len() - hits.len());
        let mut keep_at = VecDeque::with_capacity(keep.capacity());
        for (k, (p, at)) in dist
            .backlog
            .drain(..)
            .zip(dist.backlog_at.drain(..))
            .enumerate()
        {
            if next.next_if_eq(&k).is_some() {
                dist.exported.push(p);
                dist.exported_at.push(at);
            } else {
                keep.push_back(p);
                keep_at.push_back(at);
            }
        }
        dist.backlog = keep;
        dist.backlog_at = keep_at;
    }

    /// Moves the packets of buckets migrating here out of `inbound[s]` into `held`, in
    /// order, keyed by their arrival. If `tag` panics, nothing has moved.
    fn divert_held(&mut self, s: usize) {
        self.tags.clear();
        for p in &self.inbound[s] {
            self.tags.push((self.tag)(p));
        }
        let own = self.dist.ownership.as_ref().expect("set by nodes::new");
        if !self.tags.iter().any(|&t| own.held_here(t)) {
            return;
        }
        let key = hold_key(if s == self.id { 0 } else { self.inbound_at[s] }, false);
        for (p, &t) in core::mem::take(&mut self.inbound[s])
            .into_iter()
            .zip(&self.tags)
        {
            if own.held_here(t) {
                self.held.push((key, p));
                self.stats.held += 1;
            } else {
                self.inbound[s].push(p);
            }
        }
    }

    /// Brings this node's copy of the ownership map up to date (one load when nothing
    /// changed) and adopts a new version; releases the packets of buckets whose handover
    /// into this node ended, each source's in front of what came from it since.
    ///
    /// The steps that run the user's `tag` (re-sorting, releasing) are redone at the next
    /// call if it panics: a version counts as adopted, and held packets as looked at for
    /// a version, only once they are done.
    fn refresh_map(&mut self) {
        // Reschedules set aside by the current copy (a panic may have left some) are
        // queued by it first, before a release can let newer ones of their flows pass.
        self.export_reschedules();
        let own = self.dist.ownership.as_mut().expect("set by nodes::new");
        self.map.refresh(own);
        let version = own.version();
        if version == self.adopted && version == self.released {
            return;
        }
        self.holding = own.holding();
        if version != self.adopted {
            // Reschedules still waiting for room on a bridge were sorted by the older
            // version: sort them again, or one could reach a bucket's old owner after it
            // has handed the bucket over. Each flow's packets sit in one queue and keep
            // their order.
            self.resort_pending();
            // Every other packet this node sent by the older version must be on a bridge
            // first: the input staged for the bridges goes out (a full bridge puts the
            // adoption off to a later call; a handover waits for it).
            let mut all_out = true;
            for o in 0..self.nodes {
                all_out &= self.push_staged_out(o);
            }
            if all_out {
                self.progress.adopt(self.id, version);
                self.adopted = version;
            }
        }
        self.release_held();
        self.released = version;
    }

    /// Moves the held packets of buckets whose handover into this node ended to the end
    /// of `inbound[id]`, in the order this node read them: each source's in order, and a
    /// reschedule after what arrived before it was read, before what arrived after (their
    /// keys). Packets of their flows that arrive later wait behind them. If `tag` panics,
    /// nothing has moved (and the next call looks again).
    fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        // Tagged first: if `tag` panics, nothing has moved.
        self.tags.clear();
        for (_, p) in &self.held {
            self.tags.push((self.tag)(p));
        }
        let own = self.dist.ownership.as_ref().expect("set by nodes::new");
        if self.tags.iter().all(|&t| own.held_here(t)) {
            return;
        }
        let mut released = Vec::new();
        for ((k, p), &t) in core::mem::take(&mut self.held).into_iter().zip(&self.tags) {
            if own.held_here(t) {
                self.held.push((k, p));
            } else {
                released.push((k, p));
            }
        }
        // Stable: packets with equal keys (read together) keep their order.
        released.sort_by_key(|&(k, _)| k);
        self.inbound[self.id].extend(released.into_iter().map(|(_, p)| p));
    }

    /// Moves the reschedules waiting in `pending_out` to the queues of their owners by
    /// this node's copy of the map (its own buckets: held or routed here). The user's
    /// `tag` runs first: if it panics, nothing has moved, and the caller has not adopted
    /// the version yet (it does after this returns; the next call tries again).
    fn resort_pending(&mut self) {
        if self.pending_out.iter().all(Vec::is_empty) {
            return;
        }
        let mut all = Vec::new();
        self.tags.clear();
        for q in &self.pending_out {
            for p in q {
                self.tags.push((self.tag)(p));
            }
        }
        for q in &mut self.pending_out {
            all.append(q);
        }
        // They were read before this node read anything it holds for the bucket now
        // (it re-sorts them as soon as it adopts the version that holds it here).
        self.requeue(&mut all, &[]);
    }

    /// Whether every other node routes by map version `v` (or a later one) now.
    fn all_adopted(&self, v: u64) -> bool {
        (0..self.nodes).all(|o| o == self.id || self.progress.adopted(o) >= v)
    }

    /// Whether a packet of `bucket` waits in this node unrouted (from a bridge, or in
    /// the distributor's backlog).
    fn bucket_waiting(&mut self, bucket: usize) -> bool {
        let tag = &mut self.tag;
        self.inbound
            .iter()
            .flatten()
            .chain(self.dist.backlog.iter())
            .any(|p| bucket_of(tag(p)) == bucket)
    }

    /// Advances the migration out of this node, if any (see [`migrate`](Self::migrate)),
    /// through as many phases as are complete now.
    fn drive_drain(&mut self) {
        // The user's `tag` runs here (looking for the bucket's packets), with the drain
        // still in place: if it panics, the drain goes on at the next call.
        // Whether the others adopted is read once too: a node adopting between two reads
        // would let this call pass the Adoption phase without having looked.
        let (adopted, waiting) = match &self.drain {
            None => return,
            Some(d) => {
                let adopted = match d.phase {
                    Phase::Adoption => self.all_adopted(d.version),
                    Phase::Bridges(_) | Phase::Workers(_) | Phase::Delivery(_) => true,
                };
                let bucket = d.bucket;
                (adopted, adopted && self.bucket_waiting(bucket))
            }
        };
        let Some(mut d) = self.drain.take() else {
            return;
        };
        loop {
            match &d.phase {
                Phase::Adoption => {
                    if !adopted {
                        break;
                    }
                    // Every other node routes the bucket elsewhere now; what each sent
                    // here before is on its bridge (`adopted` was stored after those
                    // pushes): read up to the bridge's tail as of now.
                    let mut targets = vec![0; self.nodes];
                    for (s, t) in targets.iter_mut().enumerate() {
                        if let Some(rx) = self.inb[s].as_mut() {
                            *t = self.read_from[s] + rx.refresh() as u64;
                        }
                    }
                    d.phase = Phase::Bridges(targets);
                }
                Phase::Bridges(targets) => {
                    let read = targets.iter().zip(&self.read_from).all(|(t, r)| r >= t);
                    if !read || waiting {
                        break;
                    }
                    d.phase = Phase::Workers(self.dist.lanes.iter().map(|l| l.sent).collect());
                }
                Phase::Workers(sent) => {
                    let caught_up = self
                        .dist
                        .lanes
                        .iter()
                        .zip(sent)
                        .all(|(l, &s)| l.completed >= s);
                    if !caught_up {
                        break;
                    }
                    if waiting {
                        // A worker's reschedule (or a leaving worker's hand-back) put a
                        // packet of the bucket in the backlog: route it first.
                        d.phase = Phase::Bridges(vec![0; self.nodes]);
                        break;
                    }
                    if self.dist.bucket_in_flight(d.bucket) {
                        // Routed here after the counts were taken: wait for it too.
                        d.phase = Phase::Workers(self.dist.lanes.iter().map(|l| l.sent).collect());
                        break;
                    }
                    if !self.dist.exported.is_empty() {
                        // Not expected (the call's last step queued them); the counts
                        // below take only queued ones, so wait for the next call.
                        break;
                    }
                    // Every reschedule the workers made from the bucket's packets has been
                    // read: queued for a bridge, sent, or placed here.
                    // Reschedules waiting for room go out after the input staged for the
                    // same node (which entered before they were read): both count.
                    let targets = (0..self.nodes)
                        .map(|o| match self.pending_out[o].len() as u64 {
                            0 => self.resched_end[o],
                            waiting => {
                                self.pushed_to[o] + self.staged_out[o].len() as u64 + waiting
                            }
                        })
                        .collect();
                    d.phase = Phase::Delivery(targets);
                }
                Phase::Delivery(_) if waiting => {
                    // Not expected (see `Phase::Delivery`); were one here, it would be
                    // routed first, as above.
                    d.phase = Phase::Bridges(vec![0; self.nodes]);
                    break;
                }
                Phase::Delivery(_) => {
                    let Phase::Delivery(targets) = &mut d.phase else {
                        unreachable!("matched above");
                    };
                    if !self.delivered(targets) {
                        break;
                    }
                    // Nothing of the bucket is here, and nothing more can come: the other
                    // nodes send it elsewhere, new input here waits with the caller, and
                    // a reschedule into it by a worker here goes to the new owner. The
                    // reschedules made here from its packets wait at their flows' owners.
                    // The new owner starts.
                    self.map.finish(self.id, |b| b == d.bucket);
                    self.stats.migrations += 1;
                    self.refresh_map();
                    return;
                }
            }
        }
        self.drain = Some(d);
    }

    /// Whether every other node has read, off the bridge from this node, `targets[o]`
    /// packets (a handover's [`Phase::Delivery`]); the targets reached are set to 0, so
    /// that only the heads of the bridges still short of theirs are read (the consumers'
    /// lines).
    fn delivered(&self, targets: &mut [u64]) -> bool {
        let mut all = true;
        for (o, target) in targets.iter_mut().enumerate() {
            let Some(tx) = self.out[o].as_ref().filter(|_| *target > 0) else {
                continue;
            };
            // Reschedules still waiting for room were counted as sent to `o`; if they went
            // elsewhere since (a new map version re-sorted them, or `o` was dropped), the
            // count stops at what was pushed.
            if self.pending_out[o].is_empty() {
                *target = (*target).min(self.pushed_to[o]);
            }
            // `len` loads the consumer's head (Acquire), pairing with the Release store of
            // its head after it took the packets: what it read is in its queues (or
            // placed) before this node ends the handover, which it learns only after.
            // A dropped node reads nothing more: nothing of it to wait for.
            if *target <= self.pushed_to[o] - tx.len() as u64 || tx.is_abandoned() {
                *target = 0;
            } else {
                all = false;
            }
        }
        all
    }

    /// Publishes this node's counts when they changed (a store to its own line, read by
    /// nobody while nobody flushes).
    fn publish(&mut self) {
        let v = self.dist.stats.values();
        let gone = v[DROPPED] + v[LOST];
        if gone != self.seen_gone {
            self.finished += gone - self.seen_gone;
            self.seen_gone = gone;
        }
        self.progress.publish(self.id, self.entered, self.finished);
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
        let mut gone = self.dist.exported.len()
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
        let held: u64 = self
            .dist
            .lanes
            .iter()
            .map(|l| l.sent - l.cursor + l.leaving.len() as u64)
            .sum();
        let v = self.dist.stats.values();
        let counted = v[DROPPED] + v[LOST];
        let total = self.finished
            + (counted - self.seen_gone)
            + gone as u64
            + held
            + self.dist.backlog.len() as u64
            + self.dist.returned.len() as u64;
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

#[cfg(all(test, loom))]
mod loom_tests {
    use super::super::ownership::{default_owner, SharedMap};
    use super::{bucket_of, Quiescence};
    use crate::fifo::spsc;
    use crate::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    /// A flow's tag whose bucket node 0 owns at the start, and that bucket.
    fn flow_of_node_0(nodes: usize) -> (u64, usize) {
        let tag = (0u64..)
            .find(|&t| default_owner(bucket_of(t), nodes) == 0)
            .unwrap();
        (tag, bucket_of(tag))
    }

    /// The new owner's side of a handover: node 0 moves the flow's bucket to node 1 while
    /// node 2 takes a packet of the flow (adopting a newer map at the start of its call,
    /// as `NodeDistributor::distribute` does, and routing by its copy). Node 1, which may
    /// not have seen the new version yet, reads its bridge from node 2 and, having read a
    /// packet, refreshes its copy once more before deciding (`pump_local`): its copy then
    /// knows the migration (it holds the packet). Without the second refresh, a packet
    /// routed by a newer map than node 1's copy is routed as if node 1 did not own the
    /// bucket (before node 0 is done with it), and the model fails; so it does if the
    /// version line is raised after the map's publication instead of before.
    #[test]
    fn a_receiver_knows_the_map_its_sender_routed_by() {
        let (tag, b) = flow_of_node_0(3);
        // Another bucket of node 0, migrated first: node 1 has seen that change and node 2
        // has not, so node 1's copy is ahead of node 2's until node 2 looks (a version
        // line that trailed the map's publication let node 1 miss the next change).
        let other = (0..super::BUCKETS)
            .find(|&x| x != b && default_owner(x, 3) == 0)
            .unwrap();
        loom::model(move || {
            let map = Arc::new(SharedMap::new(3));
            let (mut tx, mut rx) = spsc::channel::<u64>(1).unwrap(); // node 2 -> 1
            let mut local1 = map.local(1);
            let mut local2 = map.local(2);
            map.start(other, 0, 2).unwrap();
            assert!(map.refresh(&mut local1));
            let map0 = Arc::clone(&map);
            let old = thread::spawn(move || {
                map0.start(b, 0, 1).unwrap();
            });
            let map2 = Arc::clone(&map);
            let sender = thread::spawn(move || {
                map2.refresh(&mut local2);
                if local2.owner(tag) == 1 {
                    tx.push(7).unwrap();
                }
            });
            map.refresh(&mut local1);
            if rx.pop().is_some() {
                map.refresh(&mut local1);
                assert!(
                    local1.held_here(tag),
                    "node 1 would route a packet of a bucket it does not own yet"
                );
            }
            old.join().unwrap();
            sender.join().unwrap();
        });
    }

    /// The old owner's side: node 2 takes a packet of the flow, routing by its copy of
    /// the map (adopting a newer version first), then is dropped (adopting "every
    /// version"). Node 0 moves the bucket to node 1; once it sees that node 2 adopted the
    /// new version, it reads its bridge from node 2 up to the tail it sees then. Every
    /// packet node 2 sent it must be within that count: nothing of the bucket may reach
    /// node 0 after it has handed the bucket over.
    #[test]
    fn the_old_owner_counts_every_packet_sent_by_the_old_map() {
        let (tag, b) = flow_of_node_0(3);
        loom::model(move || {
            let map = Arc::new(SharedMap::new(3));
            let q = Quiescence::new(3);
            let (mut tx, mut rx) = spsc::channel::<u64>(1).unwrap(); // node 2 -> 0
            let mut local2 = map.local(2);
            let (map2, q2) = (Arc::clone(&map), q.share());
            let sender = thread::spawn(move || {
                if map2.refresh(&mut local2) {
                    q2.adopt(2, local2.version());
                }
                if local2.owner(tag) == 0 {
                    tx.push(7).unwrap();
                }
                q2.adopt(2, u64::MAX);
            });
            let v = map.start(b, 0, 1).unwrap();
            let counted = if q.adopted(2) >= v {
                let target = rx.refresh();
                for _ in 0..target {
                    rx.pop().expect("below the tail seen");
                }
                true
            } else {
                false
            };
            sender.join().unwrap();
            if counted {
                assert!(
                    rx.pop().is_none(),
                    "a packet sent by the old map arrived after the count"
                );
            }
        });
    }

    /// Node 0 takes one packet for node 1's flows: counts it, pushes it onto the bridge,
    /// then flushes. Node 1 flushes from the start and pumps its bridge. Neither flush may
    /// return before node 1 has finished the packet.
    #[test]
    fn no_flush_returns_while_a_packet_crosses_a_bridge() {
        loom::model(|| {
            let q = Quiescence::new(2);
            let q0 = q.share();
            let (mut tx, mut rx) = spsc::channel::<u8>(2).unwrap();
            let done = Arc::new(AtomicBool::new(false));
            let done0 = Arc::clone(&done);
            let t = thread::spawn(move || {
                q0.publish(0, 1, 0);
                tx.push(7).unwrap();
                q0.set_flushing(0, true);
                while !q0.idle() {
                    thread::yield_now();
                }
                assert!(
                    done0.load(Ordering::SeqCst),
                    "node 0's flush returned early"
                );
            });
            q.set_flushing(1, true);
            let mut finished = 0;
            loop {
                if rx.pop().is_some() {
                    done.store(true, Ordering::SeqCst);
                    finished += 1;
                    q.publish(1, 0, finished);
                }
                if q.idle() {
                    break;
                }
                thread::yield_now();
            }
            assert_eq!(
                finished, 1,
                "node 1's flush returned before the packet came"
            );
            t.join().unwrap();
        });
    }
}
