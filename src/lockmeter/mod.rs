//! Lock-contention metering, for code that still takes locks: see where the time goes
//! before guessing.
//!
//! A kernel with lockmeter once showed why binding netperf to CPUs other than the ones
//! taking the NIC's interrupts lost ~30% of transactions per second: 3% of CPU in spinlock
//! contention, and which lock site it was. This module gives user code the same table:
//!
//! ```text
//!  UTIL    CON     HOLD MEAN(   MAX)      WAIT MEAN(   MAX) (% CPU)      TOTAL NOWAIT  SPIN RJECT  NAME
//! 29.5%   6.6%      0.5us( 148.0us)      0.9us( 143.0us) ( 0.49%)   37622512  93.4%  6.6%  0.0%  tcp_v4_rcv
//! ```
//!
//! - [`SpinLock`]: a test-and-test-and-set spinlock with backoff (the waiter reads the lock
//!   word and tries to take it only when it looks free, so waiters do not steal the line
//!   from the holder on every spin).
//! - [`MeteredSpinLock`] and [`MeteredMutex`] (over `std::sync::Mutex`): the same
//!   guard-based API as the lock they wrap, metered per lock *site*: the call site of
//!   `lock`/`try_lock` (`#[track_caller]`, shown as `file:line`), or one name for every
//!   acquisition of the lock if it was made with `named`.
//! - [`snapshot`] (the figures as [`SiteStats`]) and [`table`] (the lockmeter layout above,
//!   sorted by contention).
//!
//! Per site: acquisitions (TOTAL), acquired without waiting (NOWAIT %), had to wait
//! (SPIN / CON %), `try_lock` failures (RJECT %, of all attempts), hold time mean and max,
//! wait time mean and max, utilisation (UTIL: the share of wall time since the site's first
//! use that the lock was held from it), and the share of the machine's CPU time spent
//! waiting at that site (% CPU: wait time over wall time times the CPU count).
//!
//! # Cost
//!
//! Each thread records into its own shard of the site's [`counter::CounterGroup`](crate::counter::CounterGroup)
//! (found through a thread-local cache, no shared line), and the maxima are read before
//! they are raised (a shared write only on a new maximum). Counts are exact. Waits are
//! always timed; holds are timed for one acquisition in [`DEFAULT_HOLD_SAMPLING`] (32) by
//! default, chosen at random, because two clock reads per hold cost more than the lock:
//! an uncontended metered lock/unlock pair then costs one shard update and a sampling
//! test, a few times less than timing every hold
//! ([`MeteredSpinLock::with_hold_sampling`]`(1)`: exact hold figures; the costs are in
//! `docs/performance-notes.md`, section 6). Timestamps are the TSC on x86_64
//! (`core::arch::x86_64::_rdtsc`, converted to ns with a rate calibrated once against `Instant`), `Instant` elsewhere and under Miri; a
//! reading that goes backwards (a thread moved to a core whose TSC is behind) counts as 0.
//! With the const parameter `METERED = false` the wrappers do no metering work (no
//! timestamp, no site, nothing recorded; the guard and the lock keep a few words of room
//! for it). A thread keeps its shard of a site until it exits; beyond 64 such threads per
//! site, and on targets whose padded line holds fewer than 8 words, the figures go to
//! shared atomics on the site's own line instead.
//! Do not use metered locks inside a global allocator or a signal handler: recording a
//! site's first use allocates and takes the registry's lock.
//!
//! # Example
//!
//! ```
//! use flowline::lockmeter::{self, MeteredMutex};
//!
//! // `METERED` defaults to `true`; a `let` without a type names it with `::<_>`.
//! let queue = MeteredMutex::<_>::named("socket", Vec::new());
//! queue.lock().unwrap().push(1u32);
//! assert!(queue.try_lock().is_ok());
//! let s = lockmeter::snapshot().into_iter().find(|s| s.name == "socket").unwrap();
//! assert_eq!((s.total, s.nowait, s.rejected), (2, 2, 0));
//! assert!(lockmeter::table().contains("socket"));
//! ```

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::sync::{LockResult, Mutex, OnceLock, PoisonError, TryLockError, TryLockResult};
use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::counter::{CounterGroup, GroupHandle};
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::{Backoff, UnsafeCell};
use std::sync::Arc;

mod clock;
mod metered;
mod sampling;
mod sites;
mod spin;
mod stats;
#[cfg(all(test, not(loom)))]
mod tests;

use clock::*;
pub use metered::*;
pub use sampling::*;
use sites::*;
pub use spin::*;
pub use stats::*;
