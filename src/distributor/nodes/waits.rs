//! A node's waits: [`distribute_wait`](NodeDistributor::distribute_wait) (until its
//! workers have credit again) and [`collect_wait`](NodeDistributor::collect_wait) (until
//! something comes back), sleeping where its distributor's waits sleep: its workers notify
//! that slot after every hand-back and every bridge into the node after every push (the
//! sleeper protocol of [`crate::wait`]), so a sleeping node wakes for either.
//!
//! The re-check before sleeping is the distributor's (a hand-back read since the decision
//! to wait, or one not read yet) or a packet on a bridge into the node. What a node may
//! also wait for that no push announces (another node's progress through a handover,
//! which only its published counts show) is seen by the next poll: a sleep is a nap of at
//! most [`LONGEST_NAP`], after which the node polls again.

use std::time::Duration;

use crate::distributor::config::NoWorkers;
use crate::wait::{Step, WaitError};

use super::NodeDistributor;

/// A node's wait sleeps for naps: the first this long, each next one twice as long while
/// nothing comes, up to [`LONGEST_NAP`]. (Under Miri, whose interpreter runs a thousand
/// times slower, a thousand times longer, so that a nap still outlasts the steps around it.)
const FIRST_NAP: Duration = Duration::from_micros(if cfg!(miri) { 1_000_000 } else { 1_000 });

/// The longest nap of a node's wait: how late it sees progress that no push announces.
const LONGEST_NAP: Duration = Duration::from_micros(if cfg!(miri) { 8_000_000 } else { 8_000 });

/// A node's wait that spins or yields polls at least once per this many pauses, news or
/// not.
const POLL_EVERY: u32 = 64;

impl<T, F> NodeDistributor<T, F>
where
    F: FnMut(&T) -> u64,
{
    /// Like [`distribute`](Self::distribute), but when it can place nothing of a non-empty
    /// `pkts` (every packet's local worker is out of credit) it waits, by its distributor's
    /// [`WaitStrategy`](crate::wait::WaitStrategy), until a packet can be placed or
    /// `timeout` passes (`Duration::MAX`: no deadline). While it waits it places what
    /// comes over the bridges and publishes what is staged. Returns how many packets it
    /// took out of `pkts`: at least 1 unless `pkts` was empty.
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] if this node has no active worker: as with
    /// [`NoWorkers`] from `distribute`, its flows' packets are given back in `pkts`.
    /// [`WaitError::Timeout`] if nothing could be placed in time.
    ///
    /// # Panics
    ///
    /// As [`distribute`](Self::distribute).
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::distributor::nodes::{self, NodesConfig};
    /// let c = NodesConfig::default().nodes(1).workers_per_node(1).credit(2).bridge(8);
    /// let (mut n, mut ws) = nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// let mut w = ws.pop().unwrap();
    /// let t = std::thread::spawn(move || {
    ///     let mut b = Vec::new();
    ///     while w.recv_burst_wait(&mut b, 2, Duration::MAX).is_ok() {
    ///         w.done_burst(&mut b).unwrap();
    ///     }
    /// });
    /// // 50 packets through a worker that may hold 2.
    /// let mut input: Vec<u64> = (0..50).collect();
    /// let mut out = Vec::new();
    /// while !input.is_empty() {
    ///     n.distribute_wait(&mut input, Duration::from_secs(10)).unwrap();
    ///     n.collect(&mut out);
    /// }
    /// while out.len() < 50 {
    ///     n.collect_wait(&mut out, Duration::from_secs(10)).unwrap();
    /// }
    /// out.sort_unstable();
    /// assert_eq!(out, (0..50).collect::<Vec<u64>>());
    /// drop(n);
    /// t.join().unwrap();
    /// ```
    pub fn distribute_wait(
        &mut self,
        pkts: &mut Vec<T>,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        match self.distribute(pkts) {
            Ok(n) if n > 0 || pkts.is_empty() => Ok(n),
            Ok(_) => self.wait_for(timeout, |node| match node.distribute(pkts) {
                Ok(0) => Step::Pending,
                Ok(n) => Step::Ready(n),
                Err(NoWorkers) => Step::Closed,
            }),
            Err(NoWorkers) => Err(WaitError::Disconnected),
        }
    }

    /// Like [`collect`](Self::collect), but when nothing has come back it waits, by its
    /// distributor's [`WaitStrategy`](crate::wait::WaitStrategy), until something does or
    /// `timeout` passes (`Duration::MAX`: no deadline). While it waits it places what comes
    /// over the bridges, routes reschedules and publishes what is staged. Returns how many
    /// packets it moved onto `out`: at least 1, or 0 when this node holds nothing (nothing
    /// could come back).
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] if this node has no active worker and nothing came
    /// back: the packets waiting at the node stay there (the next
    /// [`distribute`](Self::distribute) gives them back with [`NoWorkers`]);
    /// [`WaitError::Timeout`] if nothing came back in time.
    ///
    /// # Panics
    ///
    /// As [`distribute`](Self::distribute).
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::distributor::nodes::{self, NodesConfig};
    /// let c = NodesConfig::default().nodes(1).workers_per_node(1).credit(8).bridge(8);
    /// let (mut n, _ws) = nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// let mut out = Vec::new();
    /// // Nothing held: nothing to wait for.
    /// assert_eq!(n.collect_wait(&mut out, Duration::MAX), Ok(0));
    /// ```
    pub fn collect_wait(
        &mut self,
        out: &mut Vec<T>,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        match self.collect(out) {
            0 => {
                let mut none = Vec::new();
                self.wait_for(timeout, |node| node.collect_step(out, &mut none))
            }
            n => Ok(n),
        }
    }

    /// One poll of [`collect_wait`](Self::collect_wait): a call with no input (it reads the
    /// bridges and the return rings, places and publishes), then a `collect`.
    fn collect_step(&mut self, out: &mut Vec<T>, none: &mut Vec<T>) -> Step<usize> {
        if self.dist.active_workers() == 0 {
            return if self.held() == 0 {
                Step::Ready(0)
            } else {
                Step::Closed
            };
        }
        if self.distribute(none).is_err() {
            // A leave read in this call took the last worker: the packets it gave back
            // stay at the node, for the next `distribute` to give back (counted as
            // finished then, not now).
            self.finished -= none.len() as u64;
            self.undeliverable.append(none);
            self.publish();
        }
        match self.collect(out) {
            0 if self.held() == 0 => Step::Ready(0),
            0 if self.dist.active_workers() == 0 => Step::Closed,
            0 => Step::Pending,
            n => Step::Ready(n),
        }
    }

    /// Polls with `poll` until it is ready, closed or `timeout` passes, pausing between
    /// polls by the distributor's wait strategy: spins, then yields, then (`SpinPark`)
    /// naps (module docs). After a spin or a yield it polls again only on news (a poll
    /// that found nothing new would decide the same) and every [`POLL_EVERY`] pauses (for
    /// progress no push announces).
    fn wait_for<R>(
        &mut self,
        timeout: Duration,
        mut poll: impl FnMut(&mut Self) -> Step<R>,
    ) -> Result<R, WaitError> {
        let strategy = self.dist.wait_strategy();
        let mut poll = |node: &mut Self| {
            // What this poll reads is news to the re-check: a hand-back read after the
            // mark moves the distributor's hand-back sequence.
            node.dist.decided_to_wait();
            poll(node)
        };
        match poll(self) {
            Step::Ready(r) => return Ok(r),
            Step::Closed => return Err(WaitError::Disconnected),
            Step::Pending => {}
        }
        crate::wait::wait_paced(
            self,
            strategy,
            timeout,
            (POLL_EVERY, (FIRST_NAP, LONGEST_NAP)),
            poll,
            Self::news,
            |node| &**node.dist.wake(),
        )
    }

    /// The sleeping side's re-check (read-only): a hand-back since the last poll's mark or
    /// not read yet, or a packet on a bridge into this node.
    fn news(&self) -> bool {
        self.dist.handed_back() || self.inb.iter().flatten().any(|rx| !rx.is_empty())
    }
}
