//! The worker's handle: receive bursts, hand packets back (done, dropped, rescheduled), leave.

use core::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::wait::{WaitError, WaitStrategy};

mod staging;
mod stats;
mod tickets;

use super::protocol::{Control, Parked, Ret};
use super::rejoin::RejoinToken;
pub(crate) use staging::Staging;
pub(crate) use stats::WORKER_FIELDS;
pub use stats::WORKER_STATS;
use stats::{DROPPED, LOST, RECEIVED, REDISTRIBUTED, RESCHEDULED, RETURNED};
pub use tickets::Ticket;

/// The worker's end of a distributor: one per worker thread.
///
/// A worker receives bursts with [`recv_burst`](Worker::recv_burst) and hands every
/// packet back exactly once. [`done`](Worker::done), [`done_burst`](Worker::done_burst),
/// [`drop_packet`](Worker::drop_packet) and [`reschedule`](Worker::reschedule) hand back
/// the oldest packet held (the common case, and the cheapest: processed packets travel as
/// dense as they came); [`done_at`](Worker::done_at), [`drop_at`](Worker::drop_at) and
/// [`reschedule_at`](Worker::reschedule_at) hand back the packet a [`Ticket`] names, so
/// packets of different flows may come back in any order. Packets of one flow must come
/// back in the order received: the distributor knows a flow has nothing in flight when its
/// worker's oldest packet held is past the flow's last one (no per-packet bookkeeping while
/// hand-backs come in order), and it checks the order: see
/// [`Distributor::distribute`](super::Distributor::distribute)'s panics. [`leave`](Worker::leave) hands back what it holds and consumes the handle, so a
/// handle cannot be used after leaving.
///
/// **Dropping a worker is an implicit leave.** If the handle is dropped without `leave`
/// (its thread panicked and unwound, or the handle went out of scope), the packets still
/// in its ring go back to the distributor and are redistributed in order, the packets it
/// held (received and not handed back) are counted as **lost** (the `"lost"` statistic of
/// both [`DISTRIBUTOR_STATS`](super::DISTRIBUTOR_STATS) and [`WORKER_STATS`]), and the
/// worker can [`rejoin`](super::Distributor::rejoin). Nothing is lost silently.
///
/// **A handle that is never dropped never leaves.** A forgotten handle
/// (`mem::forget`, a leaked `Box`, a reference cycle), a thread that blocks for good or a
/// process built with `panic = "abort"` runs no code, so the distributor cannot tell it
/// from a slow worker: its packets stay in flight, and a
/// [`flush`](super::Distributor::flush) waits for them until its timeout, whose
/// [`FlushError::Timeout`](super::FlushError::Timeout) names the workers it waited for.
///
/// # Example
///
/// See the [module documentation](super).
///
/// ```
/// use flowline::distributor::{self, Config};
/// let (_d, ws) = distributor::new(Config::default().workers(2).credit(8), |p: &u64| *p).unwrap();
/// assert_eq!(ws.iter().map(|w| w.id()).collect::<Vec<_>>(), [0, 1]);
/// ```
pub struct Worker<T> {
    pub(crate) id: usize,
    /// The ring ends: packets in (`rx`), processed packets back (`done`), drops,
    /// reschedules and the leave message back (`ret`). Taken out only by `Drop`.
    pub(crate) ends: Option<Parked<T>>,
    /// Packets received and not yet handed back.
    pub(crate) held: usize,
    /// Hand-backs so far (the position of the next in the hand-back stream).
    pub(crate) handed: u64,
    /// Stream position of the oldest packet held (every earlier one is handed back), or
    /// `recvd` when none is.
    pub(crate) low: u64,
    /// Stream position of the next packet to receive.
    pub(crate) recvd: u64,
    /// Positions above `low` handed back out of order (set in `handed_bits`).
    pub(crate) ooo: usize,
    /// Those of them not yet published (see [`Staging`]).
    pub(crate) staged: Staging<T>,
    pub(crate) control: Arc<Control<T>>,
}

/// A worker hands back a packet it does not hold: it has handed back as many packets as it
/// received. The packet is returned with the error.
#[derive(PartialEq, Eq)]
///
/// ```
/// use flowline::distributor::{self, Config, NotHeld};
/// let (_d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
/// assert_eq!(ws[0].done(3), Err(NotHeld(3)));
/// ```
pub struct NotHeld<T>(pub T);

impl<T> fmt::Debug for NotHeld<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NotHeld(..)")
    }
}

impl<T> fmt::Display for NotHeld<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "this worker holds no packet to hand back: every packet it received was already \
             returned, dropped or rescheduled",
        )
    }
}

impl<T> std::error::Error for NotHeld<T> {}

/// The distributor is gone and this worker's ring is empty: nothing more will arrive.
///
/// The error of [`Worker::recv_burst`], which can fail only this way; the calls that can
/// also time out say the same with [`WaitError::Disconnected`], and a ring's `try_pop`
/// with [`PopError::Disconnected`](crate::fifo::PopError::Disconnected) (as crossbeam's
/// `RecvError` and `TryRecvError::Disconnected` do). It converts into both, so `?` carries
/// it into a function that returns either.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
///
/// ```
/// use flowline::distributor::{self, Config, Disconnected};
/// use flowline::wait::WaitError;
/// let (d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
/// drop(d);
/// assert_eq!(ws[0].recv_burst(&mut Vec::new(), 8), Err(Disconnected));
/// assert_eq!(WaitError::from(Disconnected), WaitError::Disconnected);
/// ```
pub struct Disconnected;

impl From<Disconnected> for WaitError {
    fn from(_: Disconnected) -> Self {
        WaitError::Disconnected
    }
}

impl From<Disconnected> for crate::fifo::PopError {
    fn from(_: Disconnected) -> Self {
        crate::fifo::PopError::Disconnected
    }
}

impl fmt::Display for Disconnected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the distributor was dropped and this worker's ring is empty")
    }
}

impl std::error::Error for Disconnected {}

impl<T> Worker<T> {
    /// This worker's index (0-based, stable across leave and re-join).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// assert_eq!(w.id(), 0);
    /// ```
    #[must_use]
    pub fn id(&self) -> usize {
        self.id
    }

    /// A token that re-joins this worker from any thread once it has left (see
    /// [`RejoinToken::rejoin`]): the worker's own thread can [`leave`](Self::leave) and come
    /// back without a handshake with the distributor's thread, which hands the new handle
    /// over in its next call.
    #[must_use]
    pub fn rejoin_token(&self) -> RejoinToken<T> {
        RejoinToken::new(self.id, Arc::clone(&self.control))
    }

    /// Packets received and not yet handed back.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![1, 2]).unwrap();
    /// w.recv_burst(&mut Vec::new(), 8).unwrap();
    /// assert_eq!(w.held(), 2);
    /// ```
    #[must_use]
    pub fn held(&self) -> usize {
        self.held
    }

    /// Moves up to `max` packets delivered to this worker onto `out`; returns how many.
    ///
    /// # Errors
    ///
    /// [`Disconnected`] once the distributor is dropped and nothing is left to receive.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![1, 2, 3]).unwrap();
    /// let mut b = Vec::new();
    /// assert_eq!(w.recv_burst(&mut b, 2), Ok(2));
    /// assert_eq!(b, [1, 2]);
    /// drop(d);
    /// assert_eq!(w.recv_burst(&mut b, 2), Ok(1)); // what was sent still arrives
    /// assert_eq!(w.recv_burst(&mut b, 2), Err(distributor::Disconnected));
    /// ```
    pub fn recv_burst(&mut self, out: &mut Vec<T>, max: usize) -> Result<usize, Disconnected> {
        self.publish_handed_back();
        let rx = &mut self.ends().rx;
        let n = rx.pop_burst_into(out, max);
        if n == 0 && rx.is_abandoned() && rx.is_empty() {
            return Err(Disconnected);
        }
        self.held += n;
        self.recvd += n as u64;
        if n > 0 {
            self.ends().stats.add(RECEIVED, n as u64);
        }
        Ok(n)
    }

    /// Like [`recv_burst`](Self::recv_burst), but waits up to `timeout` for at least one
    /// packet (`Duration::MAX`: no deadline), by this worker's [`WaitStrategy`] (default:
    /// spin briefly, yield, then sleep until the distributor sends). A worker that uses it
    /// costs no CPU while its flows are idle; while packets flow it costs what
    /// `recv_burst` costs. Returns how many packets it appended: at least 1, except for
    /// `max == 0`, which takes nothing and returns 0 at once.
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] once the distributor is dropped and nothing is left to
    /// receive; [`WaitError::Timeout`] if nothing came in time.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::distributor::{self, Config};
    /// use flowline::wait::WaitError;
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// let t = std::thread::spawn(move || {
    ///     let mut b = Vec::new();
    ///     while let Ok(_) = w.recv_burst_wait(&mut b, 8, Duration::from_secs(10)) {
    ///         w.done_burst(&mut b).unwrap();
    ///     }
    /// });
    /// d.distribute(&mut vec![1, 2, 3]).unwrap();
    /// let mut out = Vec::new();
    /// d.flush(&mut out, Duration::from_secs(10)).unwrap();
    /// assert_eq!(out, [1, 2, 3]);
    /// drop(d); // the worker's wait ends with Disconnected
    /// t.join().unwrap();
    /// ```
    pub fn recv_burst_wait(
        &mut self,
        out: &mut Vec<T>,
        max: usize,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        self.publish_handed_back();
        let n = self.ends().rx.pop_burst_wait(out, max, timeout)?;
        self.held += n;
        self.recvd += n as u64;
        if n > 0 {
            self.ends().stats.add(RECEIVED, n as u64);
        }
        Ok(n)
    }

    /// The async form of [`recv_burst_wait`](Self::recv_burst_wait) (feature `async`):
    /// waits without blocking the thread until at least one packet is there, then appends
    /// up to `max` and returns how many (0 only for `max == 0`). It waits as the rings'
    /// futures do (see [`fifo::spsc::Consumer::pop_burst_async`](crate::fifo::spsc::Consumer::pop_burst_async)),
    /// by this worker's [`WaitStrategy`]. Dropping the future before it completes takes
    /// nothing.
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] once the distributor is dropped and nothing is left.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// let t = std::thread::spawn(move || {
    ///     flowline::wait::block_on(async move {
    ///         let mut b = Vec::new();
    ///         while let Ok(_) = w.recv_burst_async(&mut b, 8).await {
    ///             w.done_burst(&mut b).unwrap();
    ///         }
    ///     })
    /// });
    /// d.distribute(&mut vec![1, 2, 3]).unwrap();
    /// let mut out = Vec::new();
    /// d.flush(&mut out, Duration::from_secs(10)).unwrap();
    /// assert_eq!(out, [1, 2, 3]);
    /// drop(d); // the worker's wait ends with Disconnected
    /// t.join().unwrap();
    /// ```
    #[cfg(feature = "async")]
    #[cfg_attr(docsrs, doc(cfg(feature = "async")))]
    pub async fn recv_burst_async(
        &mut self,
        out: &mut Vec<T>,
        max: usize,
    ) -> Result<usize, WaitError> {
        self.publish_handed_back();
        // Counted in the same poll that takes the packets: no await point in between.
        let n = self.ends().rx.pop_burst_async(out, max).await?;
        self.held += n;
        self.recvd += n as u64;
        if n > 0 {
            self.ends().stats.add(RECEIVED, n as u64);
        }
        Ok(n)
    }

    /// **Testing only:** whether a `flush` of this worker's distributor is asleep now,
    /// waiting for a hand-back (so a test can hand one back exactly then). Hidden from the
    /// docs and outside any semver promise.
    #[doc(hidden)]
    #[cfg(feature = "__test_hooks")]
    #[must_use]
    pub fn flush_is_asleep(&self) -> bool {
        self.ends_ref().wake.has_sleepers()
    }

    /// Sets how [`recv_burst_wait`](Self::recv_burst_wait) waits.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// use flowline::wait::WaitStrategy;
    /// let (_d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// ws[0].set_wait_strategy(WaitStrategy::SpinYield { spins: 1000 });
    /// ```
    pub fn set_wait_strategy(&mut self, strategy: WaitStrategy) {
        self.ends().rx.set_wait_strategy(strategy);
    }

    /// How [`recv_burst_wait`](Self::recv_burst_wait) waits (at first
    /// [`default_wait_strategy`](super::default_wait_strategy) of its distributor's
    /// workers; a worker that re-joins keeps its strategy).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// use flowline::wait::WaitStrategy;
    /// let (_d, ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// assert_eq!(ws[0].wait_strategy(), distributor::default_wait_strategy(1));
    /// ```
    #[must_use]
    pub fn wait_strategy(&self) -> WaitStrategy {
        self.ends_ref().rx.wait_strategy()
    }

    /// Sets the cooperative budget of [`recv_burst_async`](Self::recv_burst_async)
    /// (default [`DEFAULT_ASYNC_BUDGET`](crate::wait::DEFAULT_ASYNC_BUDGET)): after that
    /// many bursts in a row received without waiting, the next call yields to the executor
    /// once; `0`: never (see
    /// [`fifo::spsc::Consumer::set_async_budget`](crate::fifo::spsc::Consumer::set_async_budget)).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (_d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// ws[0].set_async_budget(16);
    /// assert_eq!(ws[0].async_budget(), 16);
    /// ```
    #[cfg(feature = "async")]
    #[cfg_attr(docsrs, doc(cfg(feature = "async")))]
    pub fn set_async_budget(&mut self, budget: u32) {
        self.ends().rx.set_async_budget(budget);
    }

    /// The cooperative budget of [`recv_burst_async`](Self::recv_burst_async): see
    /// [`set_async_budget`](Self::set_async_budget).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (_d, ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// assert_eq!(ws[0].async_budget(), flowline::wait::DEFAULT_ASYNC_BUDGET);
    /// ```
    #[cfg(feature = "async")]
    #[cfg_attr(docsrs, doc(cfg(feature = "async")))]
    #[must_use]
    pub fn async_budget(&self) -> u32 {
        self.ends_ref().rx.async_budget()
    }

    /// Posts `r` on the control ring. The ring holds at least as many entries as the
    /// distributor lets this worker hold (its credit; entries not yet read count as held
    /// by the distributor), plus one for the leave marker, so it is never full here.
    fn post(&mut self, r: Ret<T>) {
        self.post_quietly(r);
        self.ends().wake.notify();
    }

    /// [`post`](Self::post) without waking a sleeping flush: for the entries of a leave,
    /// whose marker (posted last, by `Drop`) wakes it once.
    fn post_quietly(&mut self, r: Ret<T>) {
        if let Err(r) = self.ends().ret.push(r) {
            drop(r);
            unreachable!("return ring sized to the worker's credit cannot be full");
        }
    }

    /// Hands back a processed packet as the oldest packet held (see
    /// [`done_at`](Self::done_at) for any other).
    ///
    /// The packet's tag should be the one it was received with: the distributor's order
    /// check compares them (see [`Distributor::set_order_check`](super::Distributor::set_order_check)
    /// for workers that rewrite the tagged fields; [`reschedule`](Self::reschedule) is the
    /// way to send a packet on to another flow).
    ///
    /// # Errors
    ///
    /// [`NotHeld`] (with the packet) if this worker holds no packet.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![4]).unwrap();
    /// let mut b = Vec::new();
    /// w.recv_burst(&mut b, 8).unwrap();
    /// w.done(b.pop().unwrap()).unwrap();
    /// assert!(w.done(4).is_err()); // holds nothing now
    /// ```
    pub fn done(&mut self, pkt: T) -> Result<(), NotHeld<T>> {
        if self.held == 0 {
            return Err(NotHeld(pkt));
        }
        // Counted before the hand-back is published: a reader that has seen it come back
        // (a flush that returned) finds it in the totals too.
        self.ends().stats.add(RETURNED, 1);
        if self.ends().done.push(pkt).is_err() {
            unreachable!("done ring sized to the worker's credit cannot be full");
        }
        // The hand-back is published: this worker's counts follow it before anything else
        // runs (as in `done_burst`).
        self.held -= 1;
        self.handed += 1;
        self.take_oldest(1);
        self.ends().wake.notify();
        Ok(())
    }

    /// Hands back processed packets as one burst (one index publication), draining `pkts`
    /// front to back: completes the oldest `pkts.len()` packets held.
    ///
    /// # Errors
    ///
    /// If `pkts` holds more packets than this worker holds, the surplus (the last ones)
    /// stays in `pkts` and the error says so; the others are handed back.
    ///
    /// # Panics
    ///
    /// Never, unless this crate's own sizing broke (the return ring holds as many packets
    /// as a worker may hold).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![4, 5]).unwrap();
    /// let mut b = Vec::new();
    /// w.recv_burst(&mut b, 8).unwrap();
    /// w.done_burst(&mut b).unwrap();
    /// assert!(b.is_empty());
    /// ```
    pub fn done_burst(&mut self, pkts: &mut Vec<T>) -> Result<(), NotHeld<()>> {
        if !self.staged.is_empty() {
            return self.done_each(pkts);
        }
        let n = pkts.len().min(self.held);
        // All `n` are pushed (below). Counted before the hand-back is published: a reader that has seen it come back
        // (a flush that returned) finds it in the totals too.
        if n > 0 {
            self.ends().stats.add(RETURNED, n as u64);
        }
        let pushed = if n == pkts.len() {
            // Moved as bytes, no per-packet code.
            self.ends().done.push_burst_from(pkts)
        } else {
            self.ends().done.push_burst_iter(&mut pkts.drain(..n))
        };
        // The return ring holds at least as many entries as this worker may hold.
        assert_eq!(
            pushed, n,
            "return ring sized to the worker's credit cannot be full"
        );
        self.held -= n;
        self.handed += n as u64;
        self.take_oldest(n);
        if n > 0 {
            self.ends().wake.notify();
        }
        if pkts.is_empty() {
            Ok(())
        } else {
            Err(NotHeld(()))
        }
    }

    /// Consumes a packet: the distributor counts it as dropped (completes the oldest packet
    /// held).
    ///
    /// # Errors
    ///
    /// [`NotHeld`] (with the packet) if this worker holds no packet.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![4]).unwrap();
    /// let mut b = Vec::new();
    /// w.recv_burst(&mut b, 8).unwrap();
    /// w.drop_packet(b.pop().unwrap()).unwrap();
    /// d.collect(&mut Vec::new());
    /// assert_eq!(d.stats().snapshot().get("dropped"), Some(1));
    /// ```
    pub fn drop_packet(&mut self, pkt: T) -> Result<(), NotHeld<T>> {
        if self.held == 0 {
            return Err(NotHeld(pkt));
        }
        // Counted before the hand-back is published: a reader that has seen it come back
        // (a flush that returned) finds it in the totals too.
        self.ends().stats.add(DROPPED, 1);
        self.post(Ret::Dropped {
            at: self.handed,
            pos: self.low,
        });
        self.held -= 1;
        self.handed += 1;
        self.take_oldest(1);
        // User code (the packet's `Drop`) last, when the drop is counted and published: a
        // `Drop` that panics leaves no packet held and no position taken.
        drop(pkt);
        Ok(())
    }

    /// Hands back a packet whose flow tag the worker changed: the distributor routes it as
    /// the next packet of the new tag's flow, before any packet of that flow it receives
    /// afterwards (completes the oldest packet held). An
    /// [ordered](super::new_ordered) distributor accepts it again as a new packet: it
    /// gives up its place in the order and takes the next one.
    ///
    /// # Errors
    ///
    /// [`NotHeld`] (with the packet) if this worker holds no packet.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// // Tag = the packet's first field.
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &(u64, u64)| p.0).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![(1, 100)]).unwrap();
    /// let mut b = Vec::new();
    /// w.recv_burst(&mut b, 8).unwrap();
    /// let mut p = b.pop().unwrap();
    /// p.0 = 2; // move it to flow 2
    /// w.reschedule(p).unwrap();
    /// d.distribute(&mut vec![(2, 200)]).unwrap();
    /// w.recv_burst(&mut b, 8).unwrap();
    /// assert_eq!(b, [(2, 100), (2, 200)]); // the rescheduled packet comes first
    /// ```
    #[doc(alias = "retag")]
    pub fn reschedule(&mut self, pkt: T) -> Result<(), NotHeld<T>> {
        if self.held == 0 {
            return Err(NotHeld(pkt));
        }
        // Counted before the hand-back is published: a reader that has seen it come back
        // (a flush that returned) finds it in the totals too.
        self.ends().stats.add(RESCHEDULED, 1);
        self.post(Ret::Resched {
            at: self.handed,
            pos: self.low,
            pkt,
        });
        self.held -= 1;
        self.handed += 1;
        self.take_oldest(1);
        Ok(())
    }

    /// Hands back a packet of a [pipeline](super::new_pipeline) that goes on: the worker
    /// has set the stage (and, if it likes, the flow) that the pipeline's `route` reads,
    /// and the distributor routes it there, in the order the worker's hand-backs reach it
    /// (one forwarded by ticket past an older packet reaches it when it is published: see
    /// [`done_at`](Self::done_at)). The same hand-back as [`done`](Self::done) (the
    /// pipeline tells a forward from a completion by the stage `route` gives: a later one,
    /// or the packet's own), so
    /// forwards and completions share the done ring and its bursts:
    /// [`done_burst`](Self::done_burst) hands back both kinds at once. Like every in-order
    /// call it hands back the oldest packet held: a worker hands a burst's packets back in
    /// the order it received them, or uses [`forward_at`](Self::forward_at) and
    /// [`done_at`](Self::done_at) by ticket.
    ///
    /// # Errors
    ///
    /// [`NotHeld`] (with the packet) if this worker holds no packet.
    ///
    /// ```
    /// use flowline::distributor::{self, Config, StageType};
    /// let (mut d, mut ws) = distributor::new_pipeline(
    ///     Config::default().workers(1).credit(8),
    ///     &[StageType::Atomic, StageType::Atomic],
    ///     |p: &(usize, u64)| *p, // (stage, flow)
    /// ).unwrap();
    /// d.distribute(&mut vec![(0, 5)]).unwrap();
    /// let mut b = Vec::new();
    /// ws[0].recv_burst(&mut b, 8).unwrap();
    /// ws[0].forward((1, 5)).unwrap();
    /// d.distribute(&mut Vec::new()).unwrap();
    /// ws[0].recv_burst(&mut b, 8).unwrap();
    /// assert_eq!(b, [(0, 5), (1, 5)]);
    /// ```
    #[doc(alias = "enqueue_forward")]
    pub fn forward(&mut self, pkt: T) -> Result<(), NotHeld<T>> {
        self.done(pkt)
    }

    /// Leaves the distributor: hands back `unprocessed` (packets received and not processed,
    /// oldest first; they are redistributed in order, together with whatever was still in
    /// this worker's ring) and parks the ring ends for a later
    /// [`rejoin`](super::Distributor::rejoin). Packets this worker holds and does not pass
    /// in `unprocessed` are counted as dropped, so the distributor's accounting stays exact.
    ///
    /// # Errors
    ///
    /// If `unprocessed` holds more packets than the worker holds, the surplus is given
    /// back in [`NotHeld`]'s `Vec`.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![1, 2]).unwrap();
    /// let mut b = Vec::new();
    /// w.recv_burst(&mut b, 1).unwrap(); // holds 1; 2 is still in its ring
    /// w.leave(b).unwrap();
    /// let mut again = Vec::new();
    /// assert!(d.distribute(&mut again).is_err()); // no worker: 1 and 2 come back, in order
    /// assert_eq!(again, [1, 2]);
    /// ```
    pub fn leave(mut self, unprocessed: Vec<T>) -> Result<(), NotHeld<Vec<T>>> {
        // What was handed back goes back first, before the rest is given up.
        self.publish_staged(false);
        let mut surplus = Vec::new();
        for pkt in unprocessed {
            if self.held == 0 {
                surplus.push(pkt);
                continue;
            }
            // Counted before it is published, as in `drop_packet`.
            self.ends().stats.add(REDISTRIBUTED, 1);
            self.post_quietly(Ret::Unprocessed {
                at: self.handed,
                pos: self.low,
                pkt,
            });
            self.held -= 1;
            self.handed += 1;
            self.take_oldest(1);
        }
        while self.held > 0 {
            // Counted before it is published, as in `drop_packet`.
            self.ends().stats.add(DROPPED, 1);
            self.post_quietly(Ret::Dropped {
                at: self.handed,
                pos: self.low,
            });
            self.held -= 1;
            self.handed += 1;
            self.take_oldest(1);
        }
        // `Drop` posts the leave marker and parks the ring ends.
        drop(self);
        if surplus.is_empty() {
            Ok(())
        } else {
            Err(NotHeld(surplus))
        }
    }
}

impl<T> Worker<T> {
    /// The ring ends (taken only by `Drop`).
    #[inline(always)]
    fn ends(&mut self) -> &mut Parked<T> {
        match &mut self.ends {
            Some(e) => e,
            None => unreachable!("a worker's ring ends are taken only by its Drop"),
        }
    }

    /// [`ends`](Self::ends), shared.
    #[inline(always)]
    fn ends_ref(&self) -> &Parked<T> {
        match &self.ends {
            Some(e) => e,
            None => unreachable!("a worker's ring ends are taken only by its Drop"),
        }
    }
}

impl<T> Drop for Worker<T> {
    /// The implicit leave (see the type's docs): packets still held are counted as lost,
    /// the leave marker follows, and the ring ends are parked for the distributor, which
    /// recovers what this worker never received. Runs no user code while the distributor
    /// lives; if the distributor is gone, the packets still in this worker's rings are
    /// dropped here (their `Drop` runs).
    fn drop(&mut self) {
        // Handed back, so not lost: published before the rest is counted lost.
        self.publish_staged(false);
        if self.held > 0 {
            let n = self.held as u64;
            // Counted before it is published, as in `drop_packet`.
            self.ends().stats.add(LOST, n);
            self.post_quietly(Ret::Lost { at: self.handed, n });
            self.handed += n;
            self.held = 0;
        }
        self.post(Ret::Leave { at: self.handed });
        let ends = self.ends.take();
        *self
            .control
            .parked
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = ends;
    }
}

impl<T> fmt::Debug for Worker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("id", &self.id)
            .field("held", &self.held)
            .field("staged", &self.staged.len())
            .finish()
    }
}
