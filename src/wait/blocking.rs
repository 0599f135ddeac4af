//! The blocking waits' loops, shared by every waitable ring end: try the operation, then
//! spin, yield and sleep by the end's [`WaitStrategy`], re-checking after announcing a
//! sleep (the sleeper's half of the barrier pair), until the operation goes on, the other
//! side is gone or the timeout passes.

use super::*;

/// One poll of a wait for one item, for `pop_wait` and `pop_async` of both rings: the item
/// `pop` returns, or, when it finds none and the other end is `gone`, one more `pop`
/// (items published before the drop are seen after it) and `Closed` if that finds nothing.
pub(crate) fn poll_one<H, R>(
    h: &mut H,
    mut pop: impl FnMut(&mut H) -> Option<R>,
    gone: impl Fn(&H) -> bool,
) -> Step<R> {
    match pop(h) {
        Some(v) => Step::Ready(v),
        None if gone(h) => pop(h).map_or(Step::Closed, Step::Ready),
        None => Step::Pending,
    }
}

/// One poll of a wait for room, for `push_wait` and `push_async` of both rings: `Closed`
/// if the other end is `gone` (checked first: an item is never pushed into a ring nobody
/// reads) or the item was already pushed; otherwise `push` of the item in `slot`, which
/// stays there if the ring is full.
pub(crate) fn poll_push<H, T>(
    h: &mut H,
    slot: &mut Option<T>,
    push: impl FnOnce(&mut H, T) -> Result<(), T>,
    gone: impl Fn(&H) -> bool,
) -> Step<()> {
    if gone(h) {
        return Step::Closed;
    }
    match slot.take().map(|v| push(h, v)) {
        Some(Ok(())) => Step::Ready(()),
        Some(Err(v)) => {
            *slot = Some(v);
            Step::Pending
        }
        None => Step::Closed,
    }
}

/// A burst with a wait, for both rings' `push_burst_wait`: the fast path is one Relaxed
/// load of the consumer-gone flag (`gone_now`, a line nobody writes until the drop) and one
/// `push`; only after a full ring does it wait (the out-of-line [`wait_after_miss`]), with
/// the Acquire check (`gone`) before each poll. An Acquire load on every burst would make
/// the compiler reload the ring end's fields after it (`docs/performance-notes.md`,
/// section 12).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn push_burst_or_wait<H>(
    h: &mut H,
    strategy: impl Fn(&H) -> WaitStrategy,
    timeout: Duration,
    gone_now: impl Fn(&H) -> bool,
    gone: impl Fn(&H) -> bool,
    mut push: impl FnMut(&mut H) -> usize,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
) -> Result<usize, WaitError> {
    if gone_now(h) {
        return Err(WaitError::Disconnected);
    }
    match push(h) {
        0 => push_burst_wait_slow(h, strategy, timeout, gone, push, ready, sleepers),
        n => Ok(n),
    }
}

/// [`push_burst_or_wait`] after a full ring: out of line and cold, so that the fast path
/// compiles into the caller's loop without it.
#[allow(clippy::too_many_arguments)]
#[cold]
#[inline(never)]
fn push_burst_wait_slow<H>(
    h: &mut H,
    strategy: impl Fn(&H) -> WaitStrategy,
    timeout: Duration,
    gone: impl Fn(&H) -> bool,
    mut push: impl FnMut(&mut H) -> usize,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
) -> Result<usize, WaitError> {
    // Read here, not on the fast path: copying the strategy out of the handle before the
    // first push cost instructions on every burst.
    let strategy = strategy(h);
    wait_after_miss(
        h,
        strategy,
        timeout,
        |h| poll_push_burst(h, &mut push, &gone),
        ready,
        sleepers,
    )
}

/// One poll of a wait for room for a burst, for `push_burst_wait` and the byte rings'
/// async writes: `Closed` if the other end is `gone` (checked first: nothing is pushed
/// into a ring nobody reads), else how many `push` placed, `Pending` for none.
pub(crate) fn poll_push_burst<H>(
    h: &mut H,
    push: impl FnOnce(&mut H) -> usize,
    gone: impl Fn(&H) -> bool,
) -> Step<usize> {
    if gone(h) {
        return Step::Closed;
    }
    match push(h) {
        0 => Step::Pending,
        n => Step::Ready(n),
    }
}

/// One poll of a wait for items that takes (or counts) them with `take`, for the burst
/// and `wait_for_items` forms of both rings: what `take` returned, or, when it returned 0
/// and the other end is `gone`, one more `take` (items published before the drop are seen
/// after it) and `Closed` if that finds nothing either.
pub(crate) fn poll_items<H>(
    h: &mut H,
    mut take: impl FnMut(&mut H) -> usize,
    gone: impl Fn(&H) -> bool,
) -> Step<usize> {
    match take(h) {
        0 if gone(h) => match take(h) {
            0 => Step::Closed,
            n => Step::Ready(n),
        },
        0 => Step::Pending,
        n => Step::Ready(n),
    }
}

/// One poll of a blocking operation.
pub(crate) enum Step<R> {
    /// Done.
    Ready(R),
    /// Nothing yet.
    Pending,
    /// The other end is gone and nothing more will come.
    Closed,
}

/// Waits by `strategy` until `poll` is ready or closed, or `timeout` passes. `ready` is the
/// sleeper's read-only re-check (true when a poll would make progress or see the close);
/// `sleepers` the direction to sleep on. The clock is read only after the first poll
/// failed, so an operation that finds what it wants at once costs no clock read.
#[inline]
pub(crate) fn wait_loop<H, R>(
    h: &mut H,
    strategy: WaitStrategy,
    timeout: Duration,
    mut poll: impl FnMut(&mut H) -> Step<R>,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
) -> Result<R, WaitError> {
    match poll(h) {
        Step::Ready(r) => return Ok(r),
        Step::Closed => return Err(WaitError::Disconnected),
        Step::Pending => {}
    }
    wait_after_miss(h, strategy, timeout, poll, ready, sleepers)
}

/// [`wait_loop`] for a caller whose own poll has just found nothing: it pauses (spins,
/// yields or sleeps by `strategy`) before every poll, the first included. A poll that
/// finds the ring empty (or full) has read the other end's index line, taking it from its
/// writer; polling again at once would take it again before the writer could move, so
/// a busy wait polls exactly as often as a loop of `pop` and `spin_loop` does.
///
/// While it spins, the deadline is read every 64 polls (a ring's poll is a few loads, a
/// clock read costs several of them); on every poll once the spinning ends.
#[inline(never)]
pub(crate) fn wait_after_miss<H, R>(
    h: &mut H,
    strategy: WaitStrategy,
    timeout: Duration,
    poll: impl FnMut(&mut H) -> Step<R>,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
) -> Result<R, WaitError> {
    pause_and_poll(h, strategy, timeout, Pace::RING, poll, ready, sleepers)
}

/// [`wait_after_miss`] for a poll that costs far more than a clock read and may make
/// progress round after round without finishing (the distributor's: it reads return rings
/// and routes reschedules): the deadline is read before every poll.
#[inline(never)]
pub(crate) fn wait_after_miss_heavy<H, R>(
    h: &mut H,
    strategy: WaitStrategy,
    timeout: Duration,
    poll: impl FnMut(&mut H) -> Step<R>,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
) -> Result<R, WaitError> {
    pause_and_poll(h, strategy, timeout, Pace::HEAVY, poll, ready, sleepers)
}

/// [`wait_after_miss_heavy`] for a waiter that may also wait for progress no wake
/// announces (a node of a multi-node layout: another node's handover shows only in
/// published counts). It polls after a pause only on news (`ready`) or every
/// `poll_every` pauses (a power of two), and sleeps in naps from `naps.0` doubling to
/// `naps.1` while nothing comes, polling after each.
#[inline(never)]
pub(crate) fn wait_paced<H, R>(
    h: &mut H,
    strategy: WaitStrategy,
    timeout: Duration,
    (poll_every, naps): (u32, (Duration, Duration)),
    poll: impl FnMut(&mut H) -> Step<R>,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
) -> Result<R, WaitError> {
    debug_assert!(poll_every.is_power_of_two());
    let pace = Pace {
        clock_mask: 0,
        poll_mask: poll_every - 1,
        naps: Some(naps),
    };
    pause_and_poll(h, strategy, timeout, pace, poll, ready, sleepers)
}

/// How [`pause_and_poll`] paces its clock reads, polls and sleeps.
#[derive(Clone, Copy)]
struct Pace {
    /// While spinning, the deadline is read when the pause count has every bit of this
    /// set (63: every 64 pauses; 0: every pause).
    clock_mask: u32,
    /// After a spin or a yield, a poll only on news or when the pause count has every bit
    /// of this set (0: after every pause).
    poll_mask: u32,
    /// Sleeps end after a nap (the first, and the longest it doubles to while nothing
    /// comes), or only at the deadline (`None`).
    naps: Option<(Duration, Duration)>,
}

impl Pace {
    /// A ring's: its poll is a few loads, a clock read several of them.
    const RING: Pace = Pace {
        clock_mask: 63,
        poll_mask: 0,
        naps: None,
    };
    /// A distributor's: its poll costs far more than a clock read.
    const HEAVY: Pace = Pace {
        clock_mask: 0,
        poll_mask: 0,
        naps: None,
    };
}

/// A sleeping wait's naps: the next one's length, and the first and longest (`None`:
/// sleeps end only at the deadline).
struct Naps(Option<(Duration, (Duration, Duration))>);

impl Naps {
    fn new(naps: Option<(Duration, Duration)>) -> Self {
        Naps(naps.map(|n| (n.0, n)))
    }

    fn napping(&self) -> bool {
        self.0.is_some()
    }

    /// When a sleep that starts now ends: the deadline, or the end of the nap if sooner.
    fn end(&self, deadline: Option<Instant>) -> Option<Instant> {
        let Some((nap, _)) = self.0 else {
            return deadline;
        };
        match (Instant::now().checked_add(nap), deadline) {
            (Some(e), Some(d)) => Some(e.min(d)),
            (e, d) => e.or(d),
        }
    }

    /// After a sleep: the next nap is the first again if it was woken, else twice as long
    /// up to the longest.
    fn after(&mut self, woken: bool) {
        if let Some((nap, (first, longest))) = self.0.as_mut() {
            *nap = if woken {
                *first
            } else {
                (*nap * 2).min(*longest)
            };
        }
    }
}

/// A strategy's pauses: spins, then yields, then whether it sleeps.
fn phases(strategy: WaitStrategy) -> (u32, u32, bool) {
    match strategy {
        WaitStrategy::Spin => (u32::MAX, 0, false),
        WaitStrategy::SpinYield { spins } => (spins, u32::MAX, false),
        WaitStrategy::SpinPark { spins, yields } => (spins, yields, true),
    }
}

/// The loop of [`wait_after_miss`], paced by `pace`.
#[inline(always)]
fn pause_and_poll<H, R>(
    h: &mut H,
    strategy: WaitStrategy,
    timeout: Duration,
    pace: Pace,
    mut poll: impl FnMut(&mut H) -> Step<R>,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
) -> Result<R, WaitError> {
    // The clock is read only when a deadline matters: never for `Duration::MAX`, and first
    // at the first check (after 64 polls, or when the spinning ends), so a wait that ends
    // within a short spin reads no clock; the deadline counts from that first read.
    // `Some(None)`: no deadline (too far to represent).
    let mut deadline: Option<Option<Instant>> = if timeout == Duration::MAX {
        Some(None)
    } else {
        None
    };
    let expired = |deadline: &mut Option<Option<Instant>>| match *deadline {
        Some(d) => d.is_some_and(|d| Instant::now() >= d),
        None => {
            *deadline = Some(Instant::now().checked_add(timeout));
            timeout.is_zero()
        }
    };
    let (spins, yields, park) = phases(strategy);
    let spin_forever = strategy == WaitStrategy::Spin;
    let mut n = 0u32;
    let mut naps = Naps::new(pace.naps);
    loop {
        // Every pass follows a poll that found nothing. The clock every 64 polls while
        // spinning, on every poll after. A wait that times out looks once more first, so
        // it reports what a poll sees now (an item, or the other end gone): the caller's
        // own miss may have been its only poll.
        if (n >= spins || n & pace.clock_mask == pace.clock_mask) && expired(&mut deadline) {
            // If that last poll saw progress it could not use (the re-check says so: a
            // distributor's poll reads hand-backs after deciding), one more takes it.
            let last = match poll(h) {
                Step::Pending if ready(h) => poll(h),
                step => step,
            };
            return match last {
                Step::Ready(r) => Ok(r),
                Step::Closed => Err(WaitError::Disconnected),
                Step::Pending => Err(WaitError::Timeout),
            };
        }
        let due = if spin_forever || n < spins {
            n = n.wrapping_add(1);
            crate::sync::spin_turn();
            n & pace.poll_mask == 0 || ready(h)
        } else if n - spins < yields || !park || !can_sleep() {
            n = n.saturating_add(1);
            crate::sync::yield_turn();
            n & pace.poll_mask == 0 || ready(h)
        } else {
            // `n >= spins` here, so the deadline has been read.
            let woken = sleepers(h).sleep_until(|| ready(h), naps.end(deadline.flatten()));
            naps.after(woken);
            // Woken (or timed out, or spurious): spin again before the next sleep, so
            // several threads woken for one slot do not all go back to sleep at once. A
            // nap that ended with no news naps again at once.
            if woken || !naps.napping() {
                n = 0;
            }
            true
        };
        if !due {
            // A poll now would decide as the last one did (nothing announced since).
            continue;
        }
        match poll(h) {
            Step::Ready(r) => return Ok(r),
            Step::Closed => return Err(WaitError::Disconnected),
            Step::Pending => {}
        }
    }
}
