//! The async waits' machinery (feature `async`): one poll of a ring operation from a
//! future, with a cooperative budget (as tokio's), self-wakes for the strategy's spins and
//! yields, then a registered waker; and [`block_on`] for threads that wait on one future.

use super::*;

/// Runs a future to completion on the calling thread, parking the thread while the future
/// is pending (its waker unparks it). For threads that wait on one future at a time, tests
/// and examples: not an async runtime (no tasks, no I/O, no timers).
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u32>(4).unwrap();
/// let t = std::thread::spawn(move || tx.push(7).unwrap());
/// assert_eq!(flowline::wait::block_on(rx.pop_async()), Ok(7));
/// t.join().unwrap();
/// ```
#[cfg(all(feature = "async", not(loom)))]
#[cfg_attr(docsrs, doc(cfg(feature = "async")))]
pub fn block_on<F: core::future::Future>(future: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake};
    /// Unparks the blocked thread.
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let mut future = core::pin::pin!(future);
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        // A wake that came before this park makes it return at once (the park token).
        std::thread::park();
    }
}

/// How many async operations one ring end completes in a row, without waiting, before its
/// next future yields to the executor once: 128, tokio's per-task budget. See
/// [`Consumer::set_async_budget`](crate::fifo::spsc::Consumer::set_async_budget).
///
/// ```
/// assert_eq!(flowline::wait::DEFAULT_ASYNC_BUDGET, 128);
/// ```
#[cfg(feature = "async")]
#[cfg_attr(docsrs, doc(cfg(feature = "async")))]
pub const DEFAULT_ASYNC_BUDGET: u32 = 128;

/// The cooperative budget of one async ring end: a task whose rings are always ready
/// would otherwise never return `Pending`, and on a single-threaded executor no other task
/// would run. After `budget` completions in a row, the next poll wakes its own task and
/// returns `Pending` once (the item stays where it was: nothing is taken or pushed by
/// that poll). Any `Pending` refills it, since the task went back to its executor then
/// anyway. Budget 0: never yield. Touched only by the async futures, never by the
/// synchronous operations.
#[cfg(feature = "async")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Coop {
    budget: u32,
    /// Completions left before the next yield; for budget 0 (never yield) `u32::MAX`,
    /// refilled without a yield when it runs out, so the busy path tests one field.
    left: u32,
}

#[cfg(feature = "async")]
impl Coop {
    pub(crate) const fn new() -> Self {
        Coop {
            budget: DEFAULT_ASYNC_BUDGET,
            left: DEFAULT_ASYNC_BUDGET,
        }
    }

    pub(crate) fn budget(&self) -> u32 {
        self.budget
    }

    /// The same budget, full.
    pub(crate) fn refilled(mut self) -> Self {
        self.refill();
        self
    }

    pub(crate) fn set(&mut self, budget: u32) {
        self.budget = budget;
        self.refill();
    }

    fn refill(&mut self) {
        self.left = if self.budget == 0 {
            u32::MAX
        } else {
            self.budget
        };
    }

    /// Whether a poll may go on without yielding first (what [`proceed`](Self::proceed)
    /// answers, without refilling).
    #[inline(always)]
    pub(crate) fn has_left(&self) -> bool {
        self.left != 0
    }

    /// Counts one completed operation against the budget: only after
    /// [`has_left`](Self::has_left) or [`proceed`](Self::proceed) said so (then `left` is
    /// not 0, and the count is one decrement).
    #[inline(always)]
    pub(crate) fn spend_one(&mut self) {
        debug_assert_ne!(self.left, 0, "a completion counted against a spent budget");
        // Wrapping, not saturating: never 0 here (above), and a stray completion would
        // only postpone the next yield.
        self.left = self.left.wrapping_sub(1);
    }

    /// At the start of a poll: `false` when the budget is spent (then refilled, and the
    /// caller yields; budget 0 refills and goes on).
    fn proceed(&mut self) -> bool {
        if self.left == 0 {
            self.refill();
            return self.budget == 0;
        }
        true
    }
}

/// One poll of an async wait: polls the operation, and if it must wait, first yields to
/// the executor up to the strategy's `spins + yields` times (`yielded` counts them), then
/// registers the task (`key`) on `sleepers` and re-checks with `ready`, looping while the
/// re-check says the operation can go on. A completed operation leaves nothing registered.
///
/// Inlined into each future's `poll` is only the busy ring's case: nothing registered,
/// budget left, and the operation done at the first try (the budget's count and nothing
/// else); everything else, with a second try of the operation, is out of line.
#[cfg(feature = "async")]
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn poll_async<H, R>(
    h: &mut H,
    key: &mut Option<u64>,
    yielded: &mut u32,
    strategy: WaitStrategy,
    cx: &mut core::task::Context<'_>,
    mut poll: impl FnMut(&mut H) -> Step<R>,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
    coop: impl Fn(&mut H) -> &mut Coop,
) -> core::task::Poll<Result<R, WaitError>> {
    if key.is_none() && coop(h).has_left() {
        if let Step::Ready(r) = poll(h) {
            coop(h).spend_one();
            return core::task::Poll::Ready(Ok(r));
        }
    }
    poll_async_slow(h, key, yielded, strategy, cx, poll, ready, sleepers, coop)
}

/// [`poll_async`] past its fast case.
#[cfg(feature = "async")]
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn poll_async_slow<H, R>(
    h: &mut H,
    key: &mut Option<u64>,
    yielded: &mut u32,
    strategy: WaitStrategy,
    cx: &mut core::task::Context<'_>,
    mut poll: impl FnMut(&mut H) -> Step<R>,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
    coop: impl Fn(&mut H) -> &mut Coop,
) -> core::task::Poll<Result<R, WaitError>> {
    use core::task::Poll;
    if !coop(h).proceed() {
        // The task's own waker: a panic comes out of this poll, which took nothing.
        cx.waker().wake_by_ref();
        return Poll::Pending;
    }
    // The strategy's spins and yields, as self-wakes: the task goes back to its
    // executor's queue and polls again when its turn comes, so a partner task on the same
    // executor runs meanwhile, and no registration (no heavy barrier) is needed when the
    // partner answers within the window. A self-wake poll costs about what a few spins
    // cost a thread, so the window is the spins and yields together (136 polls by
    // default). `Spin` and `SpinYield` have no window end: they never register.
    let window = match strategy {
        WaitStrategy::SpinPark { spins, yields } => Some(spins.saturating_add(yields)),
        WaitStrategy::Spin | WaitStrategy::SpinYield { .. } => None,
    };
    loop {
        let done = match poll(h) {
            Step::Ready(r) => Ok(r),
            Step::Closed => Err(WaitError::Disconnected),
            Step::Pending => {
                // Polled again after registering: if a wake consumed the registration, the
                // window starts over (as a woken thread spins again before it sleeps), so
                // that tasks woken together for one slot do not all register at once.
                if key.is_some() && sleepers(h).consumed(key) {
                    *yielded = 0;
                }
                let in_window = key.is_none() && window.map_or(true, |w| *yielded < w);
                if in_window || !can_sleep() {
                    *yielded = yielded.saturating_add(1);
                    // The task's own waker: a panic comes out of this poll, which took
                    // nothing (see `run_waker`).
                    cx.waker().wake_by_ref();
                } else if sleepers(&*h).register_waker(key, cx.waker(), || ready(&*h)) {
                    continue;
                }
                // The task goes back to its executor: a fresh budget.
                coop(h).refill();
                return Poll::Pending;
            }
        };
        sleepers(h).deregister(key);
        coop(h).spend_one();
        return Poll::Ready(done);
    }
}
