//! The worker's handle: receive bursts, hand packets back (done, dropped, rescheduled), leave.

use core::fmt;
use std::sync::{Arc, Mutex};

use crate::counter::GroupHandle;
use crate::fifo::spsc;

/// What a worker hands back on its control ring, in the order it happens (processed
/// packets go on a separate ring of bare `T`s, half the lines of this enum). Each of
/// `Dropped` and `Resched` completes the oldest packet the worker holds.
pub(crate) enum Ret<T> {
    /// Consumed by the worker (counted as dropped).
    Dropped,
    /// Processed and re-tagged: route it again as the next packet of its new flow.
    Resched(T),
    /// Received but not processed, handed back by a leaving worker.
    Unprocessed(T),
    /// The worker left; its ring ends are parked in the shared control block.
    Leave,
}

/// Ring ends a worker leaves behind for the distributor (and the next worker to join).
pub(crate) struct Parked<T> {
    pub(crate) rx: spsc::Consumer<T>,
    pub(crate) done: spsc::Producer<T>,
    pub(crate) ret: spsc::Producer<Ret<T>>,
}

/// Per-worker state shared with the distributor on the cold path only (leave / join).
pub(crate) struct Control<T> {
    pub(crate) parked: Mutex<Option<Parked<T>>>,
}

/// Names of the per-worker statistics, in the order of the worker counter group.
///
/// ```
/// assert_eq!(flowline::distributor::WORKER_STATS[0], "received");
/// ```
pub const WORKER_STATS: [&str; 4] = ["received", "returned", "rescheduled", "dropped"];

/// Index of "received" in [`WORKER_STATS`].
pub(crate) const RECEIVED: usize = 0;
pub(crate) const RETURNED: usize = 1;
pub(crate) const RESCHEDULED: usize = 2;
pub(crate) const DROPPED: usize = 3;

/// The worker's end of a distributor: one per worker thread.
///
/// A worker receives bursts with [`recv_burst`](Worker::recv_burst) and hands every
/// packet back **in the order received**, each exactly once, with [`done`](Worker::done),
/// [`drop_packet`](Worker::drop_packet) or [`reschedule`](Worker::reschedule). The
/// distributor's flow accounting counts completions per worker in that order (that is how
/// it knows when a flow has nothing in flight without per-packet bookkeeping).
/// [`leave`](Worker::leave) hands back what it holds and consumes the handle, so a handle
/// cannot be used after leaving.
///
/// # Example
///
/// See the [module documentation](super).
///
/// ```
/// use flowline::distributor::{self, Config};
/// let (_d, ws) = distributor::new(Config { workers: 2, credit: 8 }, |p: &u64| *p).unwrap();
/// assert_eq!(ws.iter().map(|w| w.id()).collect::<Vec<_>>(), [0, 1]);
/// ```
pub struct Worker<T> {
    pub(crate) id: usize,
    pub(crate) rx: spsc::Consumer<T>,
    /// Processed packets, back to the distributor.
    pub(crate) done: spsc::Producer<T>,
    /// Drops, reschedules and the leave message, back to the distributor.
    pub(crate) ret: spsc::Producer<Ret<T>>,
    /// Packets received and not yet handed back.
    pub(crate) held: usize,
    pub(crate) control: Arc<Control<T>>,
    pub(crate) stats: GroupHandle<4>,
}

/// A worker hands back a packet it does not hold: it has handed back as many packets as it
/// received. The packet is returned with the error.
#[derive(PartialEq, Eq)]
///
/// ```
/// use flowline::distributor::{self, Config, NotHeld};
/// let (_d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
///
/// ```
/// use flowline::distributor::{self, Config, Disconnected};
/// let (d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
/// drop(d);
/// assert_eq!(ws[0].recv_burst(&mut Vec::new(), 8), Err(Disconnected));
/// ```
pub struct Disconnected;

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
    /// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// assert_eq!(w.id(), 0);
    /// ```
    pub fn id(&self) -> usize {
        self.id
    }

    /// Packets received and not yet handed back.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![1, 2]).unwrap();
    /// w.recv_burst(&mut Vec::new(), 8).unwrap();
    /// assert_eq!(w.held(), 2);
    /// ```
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
    /// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
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
        let n = self.rx.pop_burst_into(out, max);
        if n == 0 && self.rx.is_abandoned() && self.rx.is_empty() {
            return Err(Disconnected);
        }
        self.held += n;
        if n > 0 {
            self.stats.add(RECEIVED, n as u64);
        }
        Ok(n)
    }

    fn hand_back(&mut self, r: Ret<T>, stat: usize) -> Result<(), NotHeld<T>> {
        if self.held == 0 {
            return Err(NotHeld(match r {
                Ret::Resched(p) | Ret::Unprocessed(p) => p,
                Ret::Dropped | Ret::Leave => unreachable!("only packet-carrying returns"),
            }));
        }
        // The return ring holds at least as many entries as the distributor lets this
        // worker hold (its credit), plus the leave marker, so it is never full here.
        if let Err(r) = self.ret.push(r) {
            drop(r);
            unreachable!("return ring sized to the worker's credit cannot be full");
        }
        self.held -= 1;
        self.stats.add(stat, 1);
        Ok(())
    }

    /// Hands back a processed packet (completes the oldest packet held).
    ///
    /// # Errors
    ///
    /// [`NotHeld`] (with the packet) if this worker holds no packet.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
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
        if self.done.push(pkt).is_err() {
            unreachable!("done ring sized to the worker's credit cannot be full");
        }
        self.held -= 1;
        self.stats.add(RETURNED, 1);
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
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![4, 5]).unwrap();
    /// let mut b = Vec::new();
    /// w.recv_burst(&mut b, 8).unwrap();
    /// w.done_burst(&mut b).unwrap();
    /// assert!(b.is_empty());
    /// ```
    pub fn done_burst(&mut self, pkts: &mut Vec<T>) -> Result<(), NotHeld<()>> {
        let n = pkts.len().min(self.held);
        let pushed = self.done.push_burst_iter(&mut pkts.drain(..n));
        // The return ring holds at least as many entries as this worker may hold.
        assert_eq!(
            pushed, n,
            "return ring sized to the worker's credit cannot be full"
        );
        self.held -= n;
        if n > 0 {
            self.stats.add(RETURNED, n as u64);
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
    /// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
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
        drop(pkt);
        if self.ret.push(Ret::Dropped).is_err() {
            unreachable!("return ring sized to the worker's credit cannot be full");
        }
        self.held -= 1;
        self.stats.add(DROPPED, 1);
        Ok(())
    }

    /// Hands back a packet whose flow tag the worker changed: the distributor routes it as
    /// the next packet of the new tag's flow, before any packet of that flow it receives
    /// afterwards (completes the oldest packet held).
    ///
    /// # Errors
    ///
    /// [`NotHeld`] (with the packet) if this worker holds no packet.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// // Tag = the packet's first field.
    /// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &(u64, u64)| p.0).unwrap();
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
    pub fn reschedule(&mut self, pkt: T) -> Result<(), NotHeld<T>> {
        self.hand_back(Ret::Resched(pkt), RESCHEDULED)
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
    /// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
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
        let mut surplus = Vec::new();
        for p in unprocessed {
            if self.held == 0 {
                surplus.push(p);
                continue;
            }
            if self.ret.push(Ret::Unprocessed(p)).is_err() {
                unreachable!("return ring sized to the worker's credit cannot be full");
            }
            self.held -= 1;
        }
        while self.held > 0 {
            if self.ret.push(Ret::Dropped).is_err() {
                unreachable!("return ring sized to the worker's credit cannot be full");
            }
            self.held -= 1;
            self.stats.add(DROPPED, 1);
        }
        if self.ret.push(Ret::Leave).is_err() {
            unreachable!("return ring keeps one slot for the leave marker");
        }
        let Worker {
            rx,
            done,
            ret,
            control,
            ..
        } = self;
        *control.parked.lock().unwrap_or_else(|e| e.into_inner()) = Some(Parked { rx, done, ret });
        if surplus.is_empty() {
            Ok(())
        } else {
            Err(NotHeld(surplus))
        }
    }
}

impl<T> fmt::Debug for Worker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("id", &self.id)
            .field("held", &self.held)
            .finish()
    }
}
