//! # flowline
//!
//! Lock-free building blocks for packet-processing and networking code, each one there to
//! remove a cache-coherence cost measured in a real packet stack.
//!
//! | module | what it is | the cache problem it removes |
//! | --- | --- | --- |
//! | [`cell`] | assign-unless-equal on atomics and plain places | rewriting an unchanged value still steals the line from every reader (DPDK virtio: 1.21x at 2 threads, 1.39x at 16 once fixed) |
//! | [`slot`] | padded single-writer signalling words | packets moved through shared per-worker buffers made DPDK's distributor miss the LLC on half its loads at 16 cores; shared lines should only signal |
//! | [`fifo::spsc`], [`fifo::mpsc`] | bounded packet rings: burst, bulk, zero-copy chunks, cached remote indices | one index-line transfer moves a whole burst; the remote index is read only when the cached copy runs out |
//! | [`fifo::niche`] | index-free SPSC ring for pointer-like items (`Box<T>`, `NonNull<T>`, non-zero integers) | no index line at all: the slots say full or empty, so single items do not ping-pong an index line between the cores |
//! | [`counter`] | per-writer sharded counters and counter groups | a shared `atomic_long_inc` capped 12 pktgen threads at 24 Mpps; each writer owns its line |
//! | [`distributor`] | the reference flow-affinity distributor, built from the parts above | packets travel in per-worker rings, one index store per burst; flow state never leaves the distributor's thread |
//! | [`distributor::nodes`] | one distributor per NUMA node, bridged by SPSC rings moving bursts; flow buckets migrate between nodes (pause, drain, unpause) | a distributor whose workers span sockets misses the LLC on a third to half of its loads; per-node distribution shares only bridge lines, one index store per burst |
//! | [`lockmeter`] | a TTAS spinlock, and spinlock / `std` mutex wrappers metered per lock site, with a lockmeter-style table | where code still takes locks, contention is seen per site (hold, wait, UTIL, % CPU waiting) before it is guessed at; metering writes only the thread's own counter shard |
//! | [`wait`] | wait strategies (spin, spin then yield, spin then park) and blocking ring operations (`pop_wait`, `push_wait`, ...), and their async forms (`pop_async`, `push_async`, ...; feature `async`) | an idle consumer need not burn a core; a busy publisher pays one load of a line nobody writes, never a shared write |
//! | [`topology`] | CPU count, pinning, current CPU | a migrating hot-path thread takes its cache with it; benchmarks need fixed placement |
//!
//! ## Features
//!
//! `std` (default): everything. Without it, with `alloc`: [`cell`], [`slot`] (without the
//! timed waits), [`fifo`] (both rings) and [`counter`] (handles; handle-less adds share one
//! shard). With neither: [`cell`] and [`slot`]. The distributor, the lockmeter and
//! `topology` need `std` (threads, clocks, pinning).
//!
//! ## Layers
//!
//! `sync` (the only place that chooses std or loom atomics) <- primitives (`cell`, `slot`,
//! ...) <- `distributor`. Under `RUSTFLAGS="--cfg loom"` every primitive is built on loom's
//! atomics and its protocols are model-checked by `tests/loom/`.
//!
//! ## Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use core::sync::atomic::{AtomicBool, Ordering};
//! use flowline::cell::AssignUnlessEqual;
//! use flowline::slot::{Signal, Slot};
//!
//! // A "notifications off" flag many cores read on every packet: only a real change
//! // dirties its line.
//! let notify_off = AtomicBool::new(true);
//! assert!(!notify_off.assign_unless_equal(true, Ordering::Release));
//!
//! // A worker signals "burst of 32 done" on its own line.
//! const DONE: u8 = 1;
//! let done = Arc::new(Slot::new(0));
//! let d = Arc::clone(&done);
//! std::thread::spawn(move || d.post_signal(Signal::pack(DONE, 32).unwrap()));
//! let s = done.wait_for_flags(DONE, Duration::from_secs(5)).unwrap();
//! assert_eq!(s.payload(), 32);
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

// (loom's slot-access tracker allocates in every configuration.)
#[cfg(any(feature = "alloc", loom))]
extern crate alloc;
// The unit tests use threads and the standard collections in every configuration.
#[cfg(all(test, not(feature = "std")))]
extern crate std;

pub(crate) mod sync;

// The README's examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod cell;
#[cfg(feature = "alloc")]
#[cfg_attr(docsrs, doc(cfg(feature = "alloc")))]
pub mod counter;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod distributor;
#[cfg(feature = "alloc")]
#[cfg_attr(docsrs, doc(cfg(feature = "alloc")))]
pub mod fifo;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod lockmeter;
pub mod slot;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod topology;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod wait;
