//! The waitable byte rings' async reads and writes (features `futures-io`, `tokio-io`):
//! one poll of a read or a write, written once for both rings and both traits, and the
//! wait state an end keeps between such polls. The trait impls themselves are the
//! `async_byte_io` macro's (`ends.rs`).
//!
//! A poll waits as the futures of [`crate::fifo::futures`] do, through the same
//! [`wait::poll_async`]: it yields to the executor for the strategy's spins and yields,
//! then registers its waker on the sleepers the other end's publications wake, and counts
//! against the end's cooperative budget. A future owns its registration; a read or write
//! has no future, so the end keeps it ([`IoWait`]) from a poll that returned `Pending` to
//! the next poll, and withdraws it when it is dropped.

use core::task::{Context, Poll};
use std::io;

use super::futures::sealed;
use crate::wait::{self, Sleepers, WaitError};

/// An end's registration and yield count between two polls of its async reads (or
/// writes).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IoWait {
    /// The registration on the sleepers this end waits on, if a poll left one.
    key: Option<u64>,
    /// Times the current read (or write) yielded to the executor before registering.
    yielded: u32,
}

impl IoWait {
    /// Withdraws the registration a poll left, when its end is dropped: only a copy of
    /// the key is handed out of line, never the end's address.
    #[inline]
    pub(crate) fn withdraw(self, sleepers: &Sleepers) {
        let mut key = self.key;
        sleepers.deregister(&mut key);
    }
}

/// What a read needs of a waitable consumer of `u8` beyond what the futures need.
pub(super) trait ByteConsumer: sealed::Consumer<Item = u8> {
    /// Up to `out.len()` bytes copied into `out`, with one release; how many.
    fn pop_bytes(&mut self, out: &mut [u8]) -> usize;
    /// Where the end keeps its reads' wait between polls.
    fn io_wait(&mut self) -> &mut IoWait;
}

/// What a write needs of a waitable producer of `u8` beyond what the futures need.
pub(super) trait ByteProducer: sealed::Producer<Item = u8> {
    /// As many bytes from the front of `items` as fit, with one publication; how many.
    fn push_bytes(&mut self, items: &[u8]) -> usize;
    /// Where the end keeps its writes' wait between polls.
    fn io_wait(&mut self) -> &mut IoWait;
}

/// The wait state taken out of its end for one poll and put back when the poll ends, also
/// by a panic (of a waker the poll runs): a registration is never lost.
struct Polling<'a, E> {
    end: &'a mut E,
    state: IoWait,
    place: fn(&mut E) -> &mut IoWait,
}

impl<'a, E> Polling<'a, E> {
    fn new(end: &'a mut E, place: fn(&mut E) -> &mut IoWait) -> Self {
        let state = *place(end);
        Polling { end, state, place }
    }
}

impl<E> Drop for Polling<'_, E> {
    fn drop(&mut self) {
        *(self.place)(self.end) = self.state;
    }
}

/// One poll of an async read: waits until at least one byte is there, then takes up to
/// `buf.len()`; `Ok(0)` at the end of the stream (the ring empty and its producers gone)
/// or for an empty `buf`.
pub(super) fn poll_read<C: ByteConsumer>(
    consumer: &mut C,
    cx: &mut Context<'_>,
    buf: &mut [u8],
) -> Poll<io::Result<usize>> {
    if buf.is_empty() {
        return Poll::Ready(Ok(0));
    }
    let mut p = Polling::new(consumer, C::io_wait);
    let Polling { end, state, .. } = &mut p;
    let strategy = end.strategy();
    let r = wait::poll_async(
        &mut **end,
        &mut state.key,
        &mut state.yielded,
        strategy,
        cx,
        |c| wait::poll_items(c, |c| c.pop_bytes(buf), C::abandoned),
        C::ready_or_closed,
        |c| c.items(),
        |c| c.coop(),
    );
    match r {
        Poll::Pending => Poll::Pending,
        Poll::Ready(r) => {
            // The next read's wait starts a fresh window, as a new `pop_async`.
            state.yielded = 0;
            Poll::Ready(match r {
                Ok(n) => Ok(n),
                Err(WaitError::Disconnected) => Ok(0),
                Err(e) => Err(super::ends::wait_error(e, C::RING)),
            })
        }
    }
}

/// One poll of an async write: waits until at least one byte of `buf` fits, then pushes
/// as many as fit with one publication; `BrokenPipe` once the consumer is gone.
pub(super) fn poll_write<P: ByteProducer>(
    producer: &mut P,
    cx: &mut Context<'_>,
    buf: &[u8],
) -> Poll<io::Result<usize>> {
    if buf.is_empty() {
        return Poll::Ready(Ok(0));
    }
    let mut p = Polling::new(producer, P::io_wait);
    let Polling { end, state, .. } = &mut p;
    let strategy = end.strategy();
    let r = wait::poll_async(
        &mut **end,
        &mut state.key,
        &mut state.yielded,
        strategy,
        cx,
        |p| wait::poll_push_burst(p, |p| p.push_bytes(buf), P::abandoned),
        P::ready_or_closed,
        |p| p.room(),
        |p| p.coop(),
    );
    match r {
        Poll::Pending => Poll::Pending,
        Poll::Ready(r) => {
            state.yielded = 0;
            Poll::Ready(r.map_err(|e| super::ends::wait_error(e, P::RING)))
        }
    }
}
