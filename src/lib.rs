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
//! ## Install
//!
//! flowline is not on crates.io yet: depend on a checkout, or on its git repository with
//! `git = "..."`:
//!
//! ```toml
//! [dependencies]
//! flowline = { path = "../flowline" }
//! ```
//!
//! ## Features
//!
//! `std` (default): everything. Without it, with `alloc`: [`cell`], [`slot`] (without the
//! timed waits), [`fifo`] (both rings) and [`counter`] (handles; handle-less adds share one
//! shard). With neither: [`cell`] and [`slot`]. The distributor, the lockmeter and
//! `topology` need `std` (threads, clocks, pinning). `async` (default): futures for the
//! waitable rings and `wait::block_on`, no dependency. `stream`: `futures_core::Stream` for
//! waitable consumers.
//!
//! ## A ring between two threads, moved in bursts
//!
//! ```
//! use flowline::fifo::spsc;
//!
//! let (mut tx, mut rx) = spsc::channel::<u64>(1024).unwrap();
//! let producer = std::thread::spawn(move || {
//!     let mut next = 0;
//!     while next < 10_000 {
//!         let burst: Vec<u64> = (next..next + 32).collect();
//!         next += tx.push_burst(&burst) as u64; // as many as fit: one index store
//!     }
//! });
//! let (mut buf, mut expect) = ([0u64; 32], 0);
//! while expect < 10_000 {
//!     let n = rx.pop_burst(&mut buf); // one index store for the whole burst
//!     for &v in &buf[..n] {
//!         assert_eq!(v, expect);
//!         expect += 1;
//!     }
//! }
//! producer.join().unwrap();
//! ```
//!
//! ## A distributor and its workers
//!
//! Packets of one flow never run on two workers at once and come back in order:
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use std::time::Duration;
//! use flowline::distributor::{self, Config};
//!
//! // Packets are (flow, sequence); the flow is the tag.
//! let (mut dist, workers) =
//!     distributor::new(Config::default().workers(2).credit(64), |p: &(u64, u64)| p.0).unwrap();
//! let threads: Vec<_> = workers
//!     .into_iter()
//!     .map(|mut w| {
//!         std::thread::spawn(move || {
//!             let mut burst = Vec::new();
//!             while w.recv_burst_wait(&mut burst, 32, Duration::MAX).is_ok() {
//!                 w.done_burst(&mut burst).unwrap(); // processed: hand them back
//!             }
//!         })
//!     })
//!     .collect();
//! let mut input: Vec<(u64, u64)> = (0..1000).map(|i| (i % 7, i)).collect();
//! let (mut out, timeout) = (Vec::new(), Duration::from_secs(10));
//! while !input.is_empty() {
//!     dist.distribute_wait(&mut input, timeout).unwrap(); // waits while no credit
//!     dist.collect(&mut out);
//! }
//! while dist.in_flight() > 0 {
//!     dist.collect_wait(&mut out, timeout).unwrap();
//! }
//! drop(dist); // the workers' waits end
//! threads.into_iter().for_each(|t| t.join().unwrap());
//! assert_eq!(out.len(), 1000);
//! # }
//! ```
//!
//! How the crate is built (its layers, where user code runs, where `unsafe` lives, how its
//! protocols are model-checked) is in the repository's ARCHITECTURE.md.
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
