//! Input shapes other than a `Vec` for a distributor's calls: a `VecDeque` the caller
//! queues packets in, and any iterator (a slice's, copied or cloned, too) with a `Vec` for
//! what is refused. Both go through [`distribute`](Distributor::distribute) without
//! allocating: the deque's buffer is lent to it as a `Vec` and given back.

use std::collections::VecDeque;

use super::config::NoWorkers;
use super::schedule::Schedule;
use super::Distributor;

impl<T, S: Schedule<T>> Distributor<T, S> {
    /// [`distribute`](Self::distribute) from a `VecDeque`: the packets it accepts leave the
    /// deque, those it cannot place now stay, in order (with [`NoWorkers`], the backlog
    /// comes back at the front, as `distribute` gives it back). The deque's buffer is used
    /// as the `Vec` in place (made contiguous first if it wraps: one pass of moves).
    ///
    /// # Errors
    ///
    /// [`NoWorkers`], as for [`distribute`](Self::distribute).
    ///
    /// # Panics
    ///
    /// As [`distribute`](Self::distribute); the packets not taken stay in the deque.
    ///
    /// ```
    /// use std::collections::VecDeque;
    /// use flowline::distributor::{self, Config};
    /// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(2), |p: &u64| *p).unwrap();
    /// let mut queue: VecDeque<u64> = VecDeque::from([7, 7, 7, 8]);
    /// assert_eq!(d.distribute_deque(&mut queue), Ok(2)); // credit 2
    /// assert_eq!(queue, [7, 8]);
    /// ```
    pub fn distribute_deque(&mut self, pkts: &mut VecDeque<T>) -> Result<usize, NoWorkers> {
        let mut lent = Lent {
            v: Vec::from(std::mem::take(pkts)),
            deque: pkts,
        };
        self.distribute(&mut lent.v)
    }

    /// [`distribute`](Self::distribute) of `rest` (packets refused by earlier calls, which
    /// are older) followed by `input`: what is refused, of either, stays in `rest`, in
    /// order. Takes a slice of packets that are `Copy` or `Clone` as
    /// `slice.iter().copied()`, a channel's packets as `rx.try_iter()`, and so on.
    ///
    /// # Errors
    ///
    /// [`NoWorkers`], as for [`distribute`](Self::distribute): everything is then in
    /// `rest`.
    ///
    /// # Panics
    ///
    /// As [`distribute`](Self::distribute); the packets not taken stay in `rest`.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(2), |p: &u64| *p).unwrap();
    /// let packets = [7u64, 7, 7, 8];
    /// let mut rest = Vec::new();
    /// assert_eq!(d.distribute_from(packets.iter().copied(), &mut rest), Ok(2));
    /// assert_eq!(rest, [7, 8]);
    /// ```
    pub fn distribute_from<I>(&mut self, input: I, rest: &mut Vec<T>) -> Result<usize, NoWorkers>
    where
        I: IntoIterator<Item = T>,
    {
        rest.extend(input);
        self.distribute(rest)
    }
}

/// A deque's buffer lent out as a `Vec`, given back when dropped (a panic in the call
/// included, with the packets the call did not take).
struct Lent<'a, T> {
    v: Vec<T>,
    deque: &'a mut VecDeque<T>,
}

impl<T> Drop for Lent<'_, T> {
    fn drop(&mut self) {
        *self.deque = VecDeque::from(std::mem::take(&mut self.v));
    }
}
