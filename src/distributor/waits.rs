//! Waiting on the distributor's side: `distribute_wait` (until credit frees up) and
//! `collect_wait` (until hand-backs arrive), by a [`WaitStrategy`] on the sleeper slot every
//! worker notifies after each hand-back (the rings' sleeper protocol, [`crate::wait`]).
//!
//! The rule that keeps a wait from sleeping through a hand-back: a poll notes the
//! distributor's hand-back sequence (the hand-backs read from every lane, its `cursor`s,
//! and the leaves read) when it decides that it has to wait, and the sleeper's re-check is
//! true when the sequence moved since (something was read after the decision, by whichever
//! part of the poll read it) or a return ring holds something unread (a hand-back no read
//! has taken yet, whose worker notifies the sleeper after publishing it). The same test
//! gates the polls while a wait spins: with nothing back since the decision, the state that
//! decided is unchanged, so a spin looks at the return rings instead of routing again.

use std::time::Duration;

use super::schedule::Schedule;
use super::{Distributor, NoWorkers};
use crate::wait::{Step, WaitError, WaitStrategy};

impl<T, S: Schedule<T>> Distributor<T, S> {
    /// Like [`distribute`](Self::distribute), but when it can place nothing of a non-empty
    /// `pkts` (every packet's worker is out of credit) it waits, by this distributor's
    /// [`WaitStrategy`] (default: spin briefly, yield, then sleep), until a worker hands
    /// something back and a packet can be placed, or `timeout` passes (`Duration::MAX`: no
    /// deadline). Returns how many packets it took out of `pkts`: at least 1 unless `pkts`
    /// was empty. A distributor thread that uses it leaves the CPU to its workers while
    /// they are behind, which matters whenever threads outnumber cores.
    ///
    /// While packets can be placed it costs what `distribute` costs, and one test of the
    /// result. Before it sleeps it publishes every staged packet (see
    /// [`set_batching`](Self::set_batching)) and reads every return ring, so no packet
    /// waits on a lane while the distributor sleeps.
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] if no worker is active (all left): as with
    /// [`NoWorkers`] from `distribute`, the backlog is given back at the front of `pkts`.
    /// [`WaitError::Timeout`] if nothing could be placed in time; `pkts` is as it was.
    ///
    /// # Panics
    ///
    /// As [`distribute`](Self::distribute).
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::distributor::{self, Config};
    /// use flowline::wait::WaitError;
    ///
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(4), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// let t = std::thread::spawn(move || {
    ///     let mut b = Vec::new();
    ///     while w.recv_burst_wait(&mut b, 4, Duration::MAX).is_ok() {
    ///         w.done_burst(&mut b).unwrap();
    ///     }
    /// });
    /// // 100 packets through a worker that may hold 4: no spin loop written here.
    /// let mut input: Vec<u64> = (0..100).collect();
    /// let mut out = Vec::new();
    /// while !input.is_empty() {
    ///     d.distribute_wait(&mut input, Duration::from_secs(10)).unwrap();
    ///     d.collect(&mut out);
    /// }
    /// while d.in_flight() > 0 {
    ///     d.collect_wait(&mut out, Duration::from_secs(10)).unwrap();
    /// }
    /// assert_eq!(out, (0..100).collect::<Vec<u64>>());
    /// drop(d);
    /// t.join().unwrap();
    ///
    /// // With no worker left, the packets are given back.
    /// let (mut d, ws) = distributor::new(Config::default().workers(1).credit(4), |p: &u64| *p).unwrap();
    /// drop(ws);
    /// let mut input = vec![1, 2];
    /// assert_eq!(d.distribute_wait(&mut input, Duration::MAX), Err(WaitError::Disconnected));
    /// assert_eq!(input, [1, 2]);
    /// ```
    pub fn distribute_wait(
        &mut self,
        pkts: &mut Vec<T>,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        match self.distribute(pkts) {
            Ok(n) if n > 0 || pkts.is_empty() => Ok(n),
            Ok(_) => self.distribute_wait_slow(pkts, timeout),
            Err(NoWorkers) => Err(WaitError::Disconnected),
        }
    }

    /// [`distribute_wait`](Self::distribute_wait) after a call that placed nothing: out of
    /// line, so the busy path is `distribute` and one test.
    #[cold]
    #[inline(never)]
    fn distribute_wait_slow(
        &mut self,
        pkts: &mut Vec<T>,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        let strategy = self.strategy;
        // The call that placed nothing decided here; what it staged goes out before any
        // sleep (a strategy without spins sleeps before its first poll).
        self.decided_to_wait();
        self.settle();
        crate::wait::wait_after_miss_heavy(
            self,
            strategy,
            timeout,
            |d| {
                if !d.handed_back() {
                    // Nothing came back since the decision: a routing pass would place
                    // nothing either, so a spin costs a look at the return rings.
                    return Step::Pending;
                }
                d.settle();
                match d.distribute(pkts) {
                    Ok(0) => {
                        d.decided_to_wait();
                        // Nothing staged may wait on a lane while the distributor sleeps:
                        // everything goes out, and the rings are read again. A hand-back
                        // this read takes came after the decision: the re-check sees it.
                        d.settle();
                        Step::Pending
                    }
                    Ok(n) => Step::Ready(n),
                    Err(NoWorkers) => Step::Closed,
                }
            },
            Self::handed_back,
            |d| &**d.wake,
        )
    }

    /// Like [`collect`](Self::collect), but when nothing has come back yet and packets are
    /// in flight it waits, by this distributor's [`WaitStrategy`], until a worker hands
    /// something back or `timeout` passes (`Duration::MAX`: no deadline). While it waits
    /// it routes the backlog (rescheduled packets, packets a leaving worker handed back)
    /// and publishes every staged packet. Returns how many packets it moved onto `out`: at
    /// least 1, or 0 when nothing is in flight (nothing could come back).
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] if no worker is active and nothing came back (packets
    /// still waiting to be routed stay in the backlog: [`flush`](Self::flush) gives them
    /// back, and so does the next `distribute`); [`WaitError::Timeout`] if nothing came
    /// back in time.
    ///
    /// # Panics
    ///
    /// As [`distribute`](Self::distribute): a worker that handed packets back out of order.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut out = Vec::new();
    /// // Nothing in flight: nothing to wait for.
    /// assert_eq!(d.collect_wait(&mut out, Duration::MAX), Ok(0));
    /// d.distribute(&mut vec![1, 2, 3]).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// let t = std::thread::spawn(move || {
    ///     let mut b = Vec::new();
    ///     while w.recv_burst_wait(&mut b, 8, Duration::MAX).is_ok() {
    ///         w.done_burst(&mut b).unwrap();
    ///     }
    /// });
    /// while out.len() < 3 {
    ///     d.collect_wait(&mut out, Duration::from_secs(10)).unwrap();
    /// }
    /// assert_eq!(out, [1, 2, 3]);
    /// drop(d);
    /// t.join().unwrap();
    /// ```
    pub fn collect_wait(
        &mut self,
        out: &mut Vec<T>,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        match self.collect(out) {
            0 => self.collect_wait_slow(out, timeout),
            n => Ok(n),
        }
    }

    /// [`collect_wait`](Self::collect_wait) after a `collect` that found nothing.
    #[cold]
    #[inline(never)]
    fn collect_wait_slow(
        &mut self,
        out: &mut Vec<T>,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        let strategy = self.strategy;
        let mut poll = |d: &mut Self| {
            d.settle();
            // Decided on what `settle` read and routed: what `collect` reads next (it reads
            // the rings again) is news, and a reschedule or a leave it reads goes to the
            // backlog unrouted, which the next poll's `settle` routes.
            d.decided_to_wait();
            match d.collect(out) {
                0 if d.in_flight() == 0 => Step::Ready(0),
                0 if d.active == 0 => Step::Closed,
                0 => Step::Pending,
                n => Step::Ready(n),
            }
        };
        // Polled at once: the `collect` that missed may have left staged packets and the
        // backlog, and read only some lanes.
        match poll(self) {
            Step::Ready(n) => return Ok(n),
            Step::Closed => return Err(WaitError::Disconnected),
            Step::Pending => {}
        }
        crate::wait::wait_after_miss_heavy(
            self,
            strategy,
            timeout,
            |d| {
                if d.handed_back() {
                    poll(d)
                } else {
                    // Nothing came back (nor left) since the decision: nothing to collect,
                    // so a spin costs a look at the return rings.
                    Step::Pending
                }
            },
            Self::handed_back,
            |d| &**d.wake,
        )
    }

    /// Publishes every staged packet, routes the backlog (while a worker is active) and
    /// reads every return ring: afterwards a return ring holds only what a worker handed
    /// back since.
    fn settle(&mut self) {
        if self.active > 0 {
            // An empty call (it publishes everything staged and reads every ring), but one
            // that finds no worker left through a leave it reads itself keeps the backlog
            // where it is: the packets stay the distributor's, in their places (an ordered
            // distributor's keep their sequence numbers), for a re-join, or for the next
            // `distribute` to give back with `NoWorkers`.
            self.begin_call(0);
            self.poll_returns();
            if self.active > 0 {
                let mut none = Vec::new();
                S::route_call(self, &mut none);
                debug_assert!(none.is_empty());
            }
        } else {
            self.poll_returns();
        }
    }

    /// Notes the hand-back sequence at a waiting call's decision to wait (module docs).
    pub(crate) fn decided_to_wait(&mut self) {
        self.wait_mark = self.handback_seq();
    }

    /// Hand-backs and leaves read so far, over every lane (it only grows while a waiting
    /// call runs: lanes are added and removed only by calls of their own).
    fn handback_seq(&self) -> u64 {
        // Wrapping: only compared for equality, so a sum past `u64::MAX` stays exact.
        let read = self
            .lanes
            .iter()
            .fold(0u64, |s, l| s.wrapping_add(l.cursor));
        read.wrapping_add(self.leaves)
    }

    /// The sleeping side's re-check (read-only): whether anything was read from the
    /// return rings since the last decision to wait, or a worker has handed something back
    /// that no read has taken yet, or a worker's token asks to re-join (which the next
    /// call serves).
    pub(crate) fn handed_back(&self) -> bool {
        self.handback_seq() != self.wait_mark
            || self.rejoin_asked()
            || self
                .lanes
                .iter()
                .any(|l| !l.done_rx.is_empty() || !l.rx.is_empty())
    }

    /// Sets how [`distribute_wait`](Self::distribute_wait) and
    /// [`collect_wait`](Self::collect_wait) wait (default: [`default_wait_strategy`] of the
    /// workers it was made with).
    ///
    /// [`default_wait_strategy`]: crate::distributor::default_wait_strategy
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// use flowline::wait::WaitStrategy;
    /// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// d.set_wait_strategy(WaitStrategy::SpinYield { spins: 100 });
    /// assert_eq!(d.wait_strategy(), WaitStrategy::SpinYield { spins: 100 });
    /// ```
    pub fn set_wait_strategy(&mut self, strategy: WaitStrategy) {
        self.strategy = strategy;
    }

    /// How [`distribute_wait`](Self::distribute_wait) and
    /// [`collect_wait`](Self::collect_wait) wait.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// use flowline::wait::WaitStrategy;
    /// let (d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// assert_eq!(d.wait_strategy(), distributor::default_wait_strategy(1));
    /// ```
    #[must_use]
    pub fn wait_strategy(&self) -> WaitStrategy {
        self.strategy
    }
}
