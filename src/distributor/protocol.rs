//! The distributor-worker protocol: what a worker hands back on its control ring (entries
//! that carry their position in the worker's hand-back stream and, for one packet, its
//! position in the stream it received), the credit-window bitmaps both ends keep of the
//! positions handed back out of order, the ring ends a leaving worker parks, and the one
//! constructor of both ends of a lane.
//!
//! The algorithm: two SPSC return rings per worker, one of bare processed packets (dense,
//! completing the oldest positions held) and one of everything else in the order it
//! happens, each entry with its position, merged by position on the distributor's side;
//! positions handed back past the oldest one held are marked in a bitmap of the credit
//! window. DPDK's `rte_distributor` returns packets instead through a per-worker cache
//! line of eight packet pointers with flag bits in their low bits, which both sides write.

use std::sync::{Arc, Mutex};

use super::rejoin::{RejoinDesk, Request};

use crossbeam_utils::CachePadded;

use super::config::ConfigError;
use super::lanes::Lane;
use super::lanes::NOT_STAGED;
use super::worker::{Staging, Worker, WORKER_FIELDS, WORKER_STATS};
use crate::counter::{CounterGroup, GroupHandle};
use crate::fifo::{spsc, CapacityError, Wait};
use crate::wait::Sleepers;

/// What a worker hands back on its control ring, in the order it happens (processed
/// packets go on a separate ring of bare `T`s, half the lines of this enum). Every entry
/// carries its position `at` in the worker's hand-back stream (how many packets it had
/// handed back before it), so the distributor can merge the two rings in the worker's
/// order and check each processed packet against the one it sent at that position.
///
/// Entries about one packet also carry the packet's position `pos` in the stream the
/// worker received: the oldest packet it holds for the in-order calls, any packet it holds
/// for the `_at` calls (hand-backs across flows in any order). Processed packets on the
/// done ring complete the oldest packet held, one after the other.
pub(crate) enum Ret<T> {
    /// Consumed by the worker (counted as dropped).
    Dropped { at: u64, pos: u64 },
    /// Processed and re-tagged: route it again as the next packet of its new flow.
    Resched { at: u64, pos: u64, pkt: T },
    /// Processed, published while an older packet is still held (a packet
    /// [`Worker::done_at`] staged, published by a receive, a request, a by-ticket drop or
    /// reschedule, a leave or a drop).
    Done { at: u64, pos: u64, pkt: T },
    /// Received but not processed, handed back by a leaving worker.
    Unprocessed { at: u64, pos: u64, pkt: T },
    /// `n` packets the worker held when its handle was dropped without `leave` (its
    /// thread panicked and unwound, or the handle went out of scope): counted as lost.
    Lost { at: u64, n: u64 },
    /// The worker left; its ring ends are parked in the shared control block.
    Leave { at: u64 },
}

impl<T> Ret<T> {
    /// The entry's position in the worker's hand-back stream.
    #[inline]
    pub(crate) fn at(&self) -> u64 {
        match *self {
            Ret::Dropped { at, .. }
            | Ret::Resched { at, .. }
            | Ret::Done { at, .. }
            | Ret::Unprocessed { at, .. }
            | Ret::Lost { at, .. }
            | Ret::Leave { at } => at,
        }
    }
}

/// Ring ends a worker leaves behind for the distributor (and the next worker to join).
pub(crate) struct Parked<T> {
    pub(crate) rx: spsc::Consumer<T, Wait>,
    pub(crate) done: spsc::Producer<T>,
    pub(crate) ret: spsc::Producer<Ret<T>>,
    /// A sleeping `flush` (shared by every worker of the distributor): notified after each
    /// hand-back on either ring. While nobody sleeps, a notification is one load of a line
    /// nobody writes.
    pub(crate) wake: Arc<CachePadded<Sleepers>>,
    /// The worker's counters ([`WORKER_STATS`]): its own one-shard group's handle. It
    /// travels with the ring ends, so the shard stays taken while the worker is away and a
    /// worker that re-joins goes on counting on it (no new handle that could find the
    /// shard still held by a handle about to drop).
    pub(crate) stats: GroupHandle<WORKER_FIELDS>,
    /// The worker's positions handed back out of order, at or above the oldest held (bit
    /// `pos & (bits - 1)`, a window as large as the distributor's tag window, so no two
    /// positions in flight share a bit). Travels with the ring ends; cleared on re-join.
    pub(crate) handed_bits: Box<[u64]>,
}

/// Per-worker state shared with the distributor on the cold path only (leave / join).
pub(crate) struct Control<T> {
    pub(crate) parked: Mutex<Option<Parked<T>>>,
    /// A re-join asked for from the worker's thread ([`RejoinToken`](super::rejoin::RejoinToken)) and its answer.
    pub(crate) rejoin: Request<T>,
    /// The distributor's side of every request.
    pub(crate) desk: Arc<RejoinDesk>,
}

/// The word and bit of stream position `pos` in a bitmap of `words` 64-bit words (a power
/// of two), one bit per position modulo the bitmap's size.
#[inline]
pub(crate) fn bit_of(pos: u64, words: usize) -> (usize, u64) {
    let i = pos as usize & (words * 64 - 1);
    (i / 64, 1u64 << (i % 64))
}

/// Both ends of a lane: the distributor's [`Lane`] and the worker's handle, for worker
/// `id` with room for `credit` packets (its three rings, the order-check tags, both
/// credit-window bitmaps and the counters).
pub(super) fn lane_pair<T>(
    id: usize,
    credit: usize,
    wake: &Arc<CachePadded<Sleepers>>,
    desk: &Arc<RejoinDesk>,
) -> Result<(Lane<T>, Worker<T>), ConfigError> {
    let (tx, mut wrx) = spsc::waitable(credit).map_err(ConfigError::AllocFailed)?;
    wrx.set_polite(crate::fifo::spsc::PolitePolling::Off);
    let (wdone, mut done_rx) = spsc::channel(credit).map_err(ConfigError::AllocFailed)?;
    done_rx.set_polite(crate::fifo::spsc::PolitePolling::Off);
    // One more slot than the credit for the leave marker.
    let (wret, mut rx) = spsc::channel(credit + 1).map_err(ConfigError::AllocFailed)?;
    // The distributor polls every lane in turn: a polite pause on one would hold up all.
    rx.set_polite(crate::fifo::spsc::PolitePolling::Off);
    // Control entries are single pops: released in groups (each poll releases what it
    // read at its end), not one index store per entry.
    rx.set_lazy_release(true);
    let tag_slots = credit.next_power_of_two();
    let tags = zeroed_words(tag_slots, tag_slots)?;
    // One bit per position of the tag window, at least one word: the positions the worker
    // and the lane mark as handed back out of order.
    let words = (tag_slots / 64).max(1);
    let handed_bits = zeroed_words(words, words * 64)?;
    let lane_bits = zeroed_words(words, words * 64)?;
    let control = Arc::new(Control {
        parked: Mutex::new(None),
        rejoin: Request::new(),
        desk: Arc::clone(desk),
    });
    let stats = Arc::new(CounterGroup::new(WORKER_STATS, 1));
    let worker = Worker {
        id,
        ends: Some(Parked {
            rx: wrx,
            done: wdone,
            ret: wret,
            wake: Arc::clone(wake),
            stats: stats.handle(),
            handed_bits,
        }),
        held: 0,
        handed: 0,
        low: 0,
        recvd: 0,
        ooo: 0,
        staged: Staging::new(words * 64),
        control: Arc::clone(&control),
    };
    let lane = Lane {
        tx,
        done_rx,
        rx,
        parked: None,
        active: true,
        sent: 0,
        published: 0,
        completed: 0,
        staged: Vec::with_capacity(credit.min(1024)),
        staged_call: NOT_STAGED,
        leaving: Vec::new(),
        leaving_notes: Vec::new(),
        stamps: tags,
        stamp_mask: tag_slots - 1,
        cursor: 0,
        handed_bits: lane_bits,
        ooo: 0,
        ooo_seen: 0,
        frozen: false,
        probe: 0,
        control,
        stats,
        removed: false,
        passed_on: 0,
    };
    Ok((lane, worker))
}

/// `n` zeroed words, or the allocator's refusal as a [`ConfigError`] naming `slots` (what
/// the words hold: packets' tags, or positions of a bitmap), never an abort.
fn zeroed_words(n: usize, slots: usize) -> Result<Box<[u64]>, ConfigError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        ConfigError::AllocFailed(CapacityError::AllocFailed {
            slots,
            bytes: n * 8,
        })
    })?;
    v.resize(n, 0u64);
    Ok(v.into_boxed_slice())
}
