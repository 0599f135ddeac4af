//! Async waits (feature `async`): futures woken by the other end's publications and
//! drops, on plain threads through `wait::block_on` and through hand-made wakers that
//! count their wakes (so a re-registered or dropped future is checked for who gets woken),
//! plus a stress of wait / wake cycles with random delays in both directions.
#![cfg(all(not(loom), feature = "async"))]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::support;

use flowline::fifo::{mpsc, spsc};
use flowline::wait::{block_on, waker_panics, WaitError, WaitStrategy};
use support::rng::Rng;
use support::waker::{counting, REGISTER_AT_ONCE};

fn delay(r: u64) {
    match r % 8 {
        0 => std::thread::sleep(Duration::from_micros(r % 50)),
        1 | 2 => std::thread::yield_now(),
        _ => {
            for _ in 0..(r % 200) {
                std::hint::spin_loop();
            }
        }
    }
}

#[test]
fn a_pending_pop_is_woken_by_a_push_and_its_waker_can_change() {
    let (mut tx, mut rx) = spsc::waitable::<u32>(4).unwrap();
    rx.set_wait_strategy(REGISTER_AT_ONCE);
    let mut fut = pin!(rx.pop_async());
    let (a, wa) = counting();
    let (b, wb) = counting();
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&wa))
        .is_pending());
    // Polled again from another task: the new waker replaces the old one.
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&wb))
        .is_pending());
    tx.push(5).unwrap();
    assert_eq!(
        a.0.load(Ordering::SeqCst),
        0,
        "the replaced waker is not woken"
    );
    assert_eq!(b.0.load(Ordering::SeqCst), 1);
    assert_eq!(
        fut.as_mut().poll(&mut Context::from_waker(&wb)),
        Poll::Ready(Ok(5))
    );
    // A completed future left nothing registered: the next push wakes nobody.
    tx.push(6).unwrap();
    assert_eq!(b.0.load(Ordering::SeqCst), 1);
}

#[test]
fn a_dropped_pending_future_is_never_woken_and_loses_nothing() {
    let (mut tx, mut rx) = spsc::waitable::<u32>(4).unwrap();
    rx.set_wait_strategy(REGISTER_AT_ONCE);
    let (a, wa) = counting();
    {
        let mut fut = pin!(rx.pop_async());
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&wa))
            .is_pending());
    }
    tx.push(1).unwrap();
    assert_eq!(
        a.0.load(Ordering::SeqCst),
        0,
        "the withdrawn registration is not woken"
    );
    assert_eq!(block_on(rx.pop_async()), Ok(1));
    // A push future dropped while waiting for room drops its item; the ring is intact.
    let (mut tx, mut rx) = spsc::waitable::<Box<u32>>(1).unwrap();
    tx.set_wait_strategy(REGISTER_AT_ONCE);
    tx.push(Box::new(1)).unwrap();
    {
        let mut fut = pin!(tx.push_async(Box::new(2)));
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&wa))
            .is_pending());
    }
    assert_eq!(rx.pop().as_deref(), Some(&1));
    assert_eq!(a.0.load(Ordering::SeqCst), 0);
    assert_eq!(rx.pop(), None);
}

#[test]
fn a_future_first_yields_to_its_executor_then_registers() {
    let (mut tx, mut rx) = spsc::waitable::<u32>(4).unwrap();
    rx.set_wait_strategy(WaitStrategy::SpinPark {
        spins: 0,
        yields: 2,
    });
    let (a, wa) = counting();
    let mut cx = Context::from_waker(&wa);
    {
        let mut fut = pin!(rx.pop_async());
        // Two polls that find nothing wake the task themselves (a yield), registering
        // nothing.
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(a.0.load(Ordering::SeqCst), 2);
        // The third registers: only a push wakes it now.
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(a.0.load(Ordering::SeqCst), 2);
        tx.push(1).unwrap();
        assert_eq!(a.0.load(Ordering::SeqCst), 3);
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(1)));
    }
    // `Spin` never registers: every empty poll is a yield.
    rx.set_wait_strategy(WaitStrategy::Spin);
    let mut fut = pin!(rx.pop_async());
    for k in 1..=5 {
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(a.0.load(Ordering::SeqCst), 3 + k);
    }
}

/// Tasks woken together for one slot start their yield window again, as woken threads
/// spin again: the one that loses the slot yields before it registers again (so K
/// producers woken for one slot do not run K - 1 heavy barriers at once).
#[test]
fn woken_tasks_yield_again_before_registering_again() {
    let (tx, mut rx) = mpsc::waitable::<u32>(1).unwrap();
    let (mut ta, mut tb) = (tx.clone(), tx);
    let one_yield = WaitStrategy::SpinPark {
        spins: 0,
        yields: 1,
    };
    ta.set_wait_strategy(one_yield);
    tb.set_wait_strategy(one_yield);
    ta.push(0).unwrap();
    let (ca, wa) = counting();
    let (cb, wb) = counting();
    let mut fa = pin!(ta.push_async(1));
    let mut fb = pin!(tb.push_async(2));
    let (mut xa, mut xb) = (Context::from_waker(&wa), Context::from_waker(&wb));
    for _ in 0..2 {
        // One self-wake each, then registered.
        assert!(fa.as_mut().poll(&mut xa).is_pending());
        assert!(fb.as_mut().poll(&mut xb).is_pending());
    }
    let counts = || (ca.0.load(Ordering::SeqCst), cb.0.load(Ordering::SeqCst));
    assert_eq!(counts(), (1, 1));
    assert_eq!(rx.pop(), Some(0)); // one slot frees: both woken
    assert_eq!(counts(), (2, 2));
    assert!(fa.as_mut().poll(&mut xa).is_ready());
    // B lost the slot: it yields (a self-wake) instead of registering at once.
    assert!(fb.as_mut().poll(&mut xb).is_pending());
    assert_eq!(counts().1, 3);
    assert!(fb.as_mut().poll(&mut xb).is_pending()); // now registered
    assert_eq!(counts().1, 3);
    assert_eq!(rx.pop(), Some(1));
    assert_eq!(counts().1, 4);
    assert!(fb.as_mut().poll(&mut xb).is_ready());
    assert_eq!(rx.pop(), Some(2));
}

#[test]
fn waits_end_with_disconnected_when_the_other_end_goes() {
    // Pending pop, then the producer is dropped: woken, and told.
    let (tx, mut rx) = spsc::waitable::<u32>(2).unwrap();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        drop(tx);
    });
    assert_eq!(block_on(rx.pop_async()), Err(WaitError::Disconnected));
    t.join().unwrap();
    // Pending push into a full ring, then the consumer is dropped: the item comes back.
    let (mut tx, rx) = mpsc::waitable::<u32>(1).unwrap();
    tx.push(1).unwrap();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        drop(rx);
    });
    let e = block_on(tx.push_async(2)).unwrap_err();
    assert_eq!((e.error, e.value), (WaitError::Disconnected, 2));
    t.join().unwrap();
    // Items pushed before the drop are still delivered first.
    let (mut tx, mut rx) = mpsc::waitable::<u32>(4).unwrap();
    tx.push(9).unwrap();
    drop(tx);
    let mut v = Vec::new();
    assert_eq!(block_on(rx.pop_burst_async(&mut v, 4)), Ok(1));
    assert_eq!(
        block_on(rx.pop_burst_async(&mut v, 4)),
        Err(WaitError::Disconnected)
    );
    assert_eq!(block_on(rx.pop_burst_async(&mut v, 0)), Ok(0));
}

/// Wait / wake cycles in both directions with random delays on both sides: the consumer
/// awaits every item of a 2-slot ring, the producer awaits room for every push.
#[test]
fn stress_wait_wake_cycles_both_directions() {
    // 10^5 cycles natively; fewer where CI says so (`STRESS_WAIT_CYCLES`, TSan) and under
    // Miri.
    let n: u32 = match std::env::var("STRESS_WAIT_CYCLES") {
        _ if cfg!(miri) => 200,
        Ok(v) => v.parse().expect("STRESS_WAIT_CYCLES: a number"),
        Err(_) => 100_000,
    };
    let (mut tx, mut rx) = spsc::waitable::<u32>(2).unwrap();
    let p = std::thread::spawn(move || {
        let mut r = Rng::new(3);
        for i in 0..n {
            block_on(tx.push_async(i)).unwrap();
            delay(r.next_u64());
        }
    });
    let mut r = Rng::new(5);
    for i in 0..n {
        assert_eq!(block_on(rx.pop_async()), Ok(i));
        delay(r.next_u64());
    }
    p.join().unwrap();
    assert_eq!(block_on(rx.pop_async()), Err(WaitError::Disconnected));
}

/// Two producers await room in a small MPSC ring while the consumer awaits bursts.
#[test]
fn mpsc_two_async_producers_and_a_burst_consumer() {
    let n: u32 = if cfg!(miri) { 100 } else { 50_000 };
    let (tx, mut rx) = mpsc::waitable::<u32>(4).unwrap();
    let producers: Vec<_> = (0..2u32)
        .map(|p| {
            let mut tx = tx.clone();
            std::thread::spawn(move || {
                let mut r = Rng::new(u64::from(p) + 11);
                for i in 0..n {
                    block_on(tx.push_async(p * n + i)).unwrap();
                    if r.next_u64() % 4 == 0 {
                        delay(r.next_u64());
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let mut next = [0u32, n];
    let mut got = Vec::new();
    loop {
        got.clear();
        match block_on(rx.pop_burst_async(&mut got, 8)) {
            Ok(k) => assert_eq!(k, got.len()),
            Err(WaitError::Disconnected) => break,
            Err(e) => panic!("{e:?}"),
        }
        for &v in &got {
            let p = (v / n) as usize;
            assert_eq!(v, next[p], "per-producer order");
            next[p] += 1;
        }
    }
    for h in producers {
        h.join().unwrap();
    }
    assert_eq!(next, [n, 2 * n]);
}

/// The distributor's workers waiting asynchronously: two workers on threads awaiting
/// `recv_burst_async`, every packet back exactly once through `flush`; a wait dropped
/// before it completes takes nothing; the future is `Send` (it can run on a multi-thread
/// executor).
#[test]
fn distributor_workers_receive_asynchronously() {
    use flowline::distributor::{self, Config};
    let n: u64 = if cfg!(miri) { 50 } else { 20_000 };
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(2).credit(16), |p: &u64| *p % 64).unwrap();
    // A wait that is dropped while pending takes nothing.
    {
        let w = &mut ws[0];
        let mut b = Vec::new();
        {
            let fut = w.recv_burst_async(&mut b, 8);
            fn is_send<F: Send>(_: &F) {}
            is_send(&fut);
            let (_c, wk) = counting();
            let mut fut = pin!(fut);
            assert!(fut
                .as_mut()
                .poll(&mut Context::from_waker(&wk))
                .is_pending());
        }
        assert!(b.is_empty());
    }
    let workers: Vec<_> = ws
        .into_iter()
        .map(|mut w| {
            std::thread::spawn(move || {
                block_on(async move {
                    let mut b = Vec::new();
                    let mut seen = 0u64;
                    while let Ok(k) = w.recv_burst_async(&mut b, 8).await {
                        assert_eq!(k, b.len());
                        seen += k as u64;
                        w.done_burst(&mut b).unwrap();
                    }
                    seen
                })
            })
        })
        .collect();
    let mut out = Vec::new();
    let mut next = 0u64;
    let mut pending = Vec::new();
    while next < n || !pending.is_empty() {
        // New packets after the ones the distributor left with us (they keep their order).
        while pending.len() < 32 && next < n {
            pending.push(next);
            next += 1;
        }
        d.distribute(&mut pending).unwrap();
        d.collect(&mut out);
    }
    d.flush(&mut out, Duration::from_secs(60)).unwrap();
    drop(d);
    let seen: u64 = workers.into_iter().map(|h| h.join().unwrap()).sum();
    out.sort_unstable();
    assert_eq!(
        out,
        (0..n).collect::<Vec<_>>(),
        "every packet back exactly once"
    );
    assert_eq!(seen, n);
}

#[test]
#[should_panic(expected = "PopFuture polled after it completed")]
fn a_completed_pop_future_polled_again_panics_and_takes_nothing() {
    let (mut tx, mut rx) = spsc::waitable::<u32>(4).unwrap();
    tx.push(1).unwrap();
    tx.push(2).unwrap();
    let (_c, w) = counting();
    let mut cx = Context::from_waker(&w);
    let mut fut = pin!(rx.pop_async());
    assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(1)));
    let _ = fut.as_mut().poll(&mut cx);
}

#[test]
fn completed_burst_futures_polled_again_panic_and_take_nothing() {
    let (mut tx, mut rx) = mpsc::waitable::<u32>(4).unwrap();
    tx.push(1).unwrap();
    let (_c, w) = counting();
    let mut out = Vec::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut cx = Context::from_waker(&w);
        let mut fut = pin!(rx.pop_burst_async(&mut out, 8));
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(1)));
        tx.push(2).unwrap();
        let _ = fut.as_mut().poll(&mut cx);
    }));
    let payload = r.unwrap_err();
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied());
    assert_eq!(msg, Some("mpsc::PopBurstFuture polled after it completed"));
    assert_eq!(out, [1]);
    assert_eq!(rx.pop(), Some(2), "the second poll took nothing");
    // `max == 0` completes at once, and also only once.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut cx = Context::from_waker(&w);
        let mut out = Vec::new();
        let mut fut = pin!(rx.pop_burst_async(&mut out, 0));
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(0)));
        let _ = fut.as_mut().poll(&mut cx);
    }));
    assert!(r.is_err());
}

/// The cooperative budget: a task whose ring always has items yields to its
/// executor after `budget` items in a row, so a second task of a single-threaded tokio
/// runtime runs after exactly `budget` items (with budget 0, only once the first task
/// ends), on both rings, for pops and for pushes; nothing is lost by the yields.
#[test]
fn a_task_whose_ring_is_always_ready_lets_other_tasks_run() {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    // Under Miri a few items and two budgets (one that yields, one that does not).
    const N: usize = if cfg!(miri) { 24 } else { 1000 };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // Runs `work` (which bumps the count once per item) and, spawned after it, a task
    // that records the count when it first runs.
    let run = |work: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
               count: Arc<AtomicUsize>| {
        rt.block_on(async move {
            let busy = tokio::spawn(work);
            let seen = tokio::spawn(async move { count.load(Ordering::SeqCst) });
            busy.await.unwrap();
            seen.await.unwrap()
        })
    };
    let budgets: &[u32] = if cfg!(miri) {
        &[5, 0]
    } else {
        &[5, flowline::wait::DEFAULT_ASYNC_BUDGET, 0]
    };
    for &budget in budgets {
        let expect = if budget == 0 { N } else { budget as usize };
        // Pops: the ring holds all N items before the task starts.
        let (mut tx, mut rx) = spsc::waitable::<usize>(N).unwrap();
        let (mut mtx, mut mrx) = mpsc::waitable::<usize>(N).unwrap();
        for i in 0..N {
            tx.push(i).unwrap();
            mtx.push(i).unwrap();
        }
        drop((tx, mtx));
        rx.set_async_budget(budget);
        mrx.set_async_budget(budget);
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let seen = run(
            Box::pin(async move {
                for i in 0..N {
                    assert_eq!(rx.pop_async().await, Ok(i));
                    c.fetch_add(1, Ordering::SeqCst);
                }
                assert_eq!(rx.pop_async().await, Err(WaitError::Disconnected));
            }),
            count.clone(),
        );
        assert_eq!(seen, expect, "spsc pops, budget {budget}");
        count.store(0, Ordering::SeqCst);
        let c = count.clone();
        let seen = run(
            Box::pin(async move {
                let mut v = Vec::new();
                while mrx.pop_burst_async(&mut v, 1).await.is_ok() {
                    c.fetch_add(1, Ordering::SeqCst);
                }
                assert_eq!(v, (0..N).collect::<Vec<_>>());
            }),
            count.clone(),
        );
        assert_eq!(seen, expect, "mpsc burst pops, budget {budget}");
        // Pushes: the ring has room for all N items.
        let (mut tx, mut rx) = spsc::waitable::<usize>(N).unwrap();
        let (mut mtx, mut mrx) = mpsc::waitable::<usize>(N).unwrap();
        tx.set_async_budget(budget);
        mtx.set_async_budget(budget);
        // The same pushes through either ring's producer.
        macro_rules! pushes {
            ($tx:ident, $ring:literal) => {{
                count.store(0, Ordering::SeqCst);
                let c = count.clone();
                let seen = run(
                    Box::pin(async move {
                        for i in 0..N {
                            $tx.push_async(i).await.unwrap();
                            c.fetch_add(1, Ordering::SeqCst);
                        }
                    }),
                    count.clone(),
                );
                assert_eq!(seen, expect, "{} pushes, budget {budget}", $ring);
            }};
        }
        pushes!(tx, "spsc");
        pushes!(mtx, "mpsc");
        for i in 0..N {
            assert_eq!((rx.pop(), mrx.pop()), (Some(i), Some(i)));
        }
        assert_eq!((rx.pop(), mrx.pop()), (None, None));
    }
}

/// A task's own waker that panics when the budget's yield wakes it: the panic comes out of
/// the poll (containing it would leave the task pending with no wake to come), and the
/// ring stays as it was (the yielding poll took nothing); the next poll takes the item.
#[test]
fn a_waker_panicking_in_the_budget_yield_loses_nothing() {
    use std::sync::Arc;
    use std::task::{Wake, Waker};
    struct Panics;
    impl Wake for Panics {
        fn wake(self: Arc<Self>) {
            panic!("waker panics");
        }
    }
    let (mut tx, mut rx) = spsc::waitable::<u32>(4).unwrap();
    rx.set_async_budget(1);
    tx.push(1).unwrap();
    tx.push(2).unwrap();
    let (_c, ok) = counting();
    assert_eq!(
        pin!(rx.pop_async()).poll(&mut Context::from_waker(&ok)),
        Poll::Ready(Ok(1))
    );
    let bad = Waker::from(Arc::new(Panics));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = pin!(rx.pop_async()).poll(&mut Context::from_waker(&bad));
    }));
    assert!(r.is_err(), "the budget's yield woke the task");
    assert_eq!(rx.pop(), Some(2), "the yielding poll took nothing");
}

/// A consumer task whose waker panics when a publication wakes it.
struct PanicsOnWake;
impl std::task::Wake for PanicsOnWake {
    fn wake(self: std::sync::Arc<Self>) {
        panic!("waker panics");
    }
}

/// An MPSC chunk commit that wakes a panicking waker publishes its items once: the panic
/// is contained, and the chunk's drop does not publish the run again.
#[test]
fn a_commit_waking_a_panicking_waker_publishes_once() {
    let (mut tx, mut rx) = mpsc::waitable::<u64>(8).unwrap();
    rx.set_wait_strategy(REGISTER_AT_ONCE);
    let bad = std::task::Waker::from(std::sync::Arc::new(PanicsOnWake));
    let mut fut = Box::pin(rx.pop_async());
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&bad))
        .is_pending());
    let before = waker_panics();
    let mut c = tx.write_chunk(1);
    c.as_mut_slices().0[0].write(7);
    // SAFETY: the one reserved slot was written just above.
    unsafe { c.commit(1) };
    assert!(
        waker_panics() > before,
        "the commit woke the panicking waker"
    );
    drop(fut);
    assert_eq!(rx.pop(), Some(7));
    assert_eq!(rx.pop(), None);
    tx.push(8).unwrap();
    assert_eq!(rx.pop(), Some(8), "the ring goes on");
}

/// A pop (single or burst, both rings) that frees a slot wakes a producer task whose waker
/// panics: the panic is contained and the pop returns its items (they were dropped with
/// the unwinding: neither returned nor in the ring).
#[test]
fn a_pop_waking_a_panicking_producer_waker_returns_its_items() {
    let bad = std::task::Waker::from(std::sync::Arc::new(PanicsOnWake));
    macro_rules! check {
        ($ring:ident) => {{
            let (mut tx, mut rx) = $ring::waitable::<u64>(1).unwrap();
            tx.set_wait_strategy(REGISTER_AT_ONCE);
            for round in 0..2u64 {
                tx.push(round).unwrap();
                let mut fut = Box::pin(tx.push_async(10 + round));
                let pending = fut.as_mut().poll(&mut Context::from_waker(&bad));
                assert!(pending.is_pending(), stringify!($ring));
                let before = waker_panics();
                let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    if round == 0 {
                        rx.pop()
                    } else {
                        let mut buf = [0; 2];
                        let n = rx.pop_burst(&mut buf);
                        (n == 1).then_some(buf[0])
                    }
                }));
                let got = got.unwrap_or_else(|_| panic!("{}: the pop unwound", stringify!($ring)));
                assert_eq!(got, Some(round), stringify!($ring));
                assert!(waker_panics() > before, "the pop woke the producer task");
                // The woken task completes its push.
                let (_c, ok) = counting();
                let done = fut.as_mut().poll(&mut Context::from_waker(&ok));
                assert_eq!(done, Poll::Ready(Ok(())), stringify!($ring));
                drop(fut);
                assert_eq!(rx.pop(), Some(10 + round), stringify!($ring));
            }
        }};
    }
    check!(spsc);
    check!(mpsc);
}

/// An MPSC consumer dropped while a producer task waits for room, whose waker panics:
/// the panic is contained and the producers learn that the consumer is gone (the flag was
/// set after the wake-up, which the panic skipped: waits never ended).
#[test]
fn an_mpsc_consumer_dropped_with_a_panicking_producer_waker_disconnects() {
    let bad = std::task::Waker::from(std::sync::Arc::new(PanicsOnWake));
    let (mut tx, rx) = mpsc::waitable::<u64>(1).unwrap();
    tx.set_wait_strategy(REGISTER_AT_ONCE);
    tx.push(1).unwrap();
    let mut tx2 = tx.clone();
    let mut fut = Box::pin(tx2.push_async(2));
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&bad))
        .is_pending());
    let before = waker_panics();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(rx)));
    assert!(r.is_ok(), "the consumer's drop unwound");
    assert!(waker_panics() > before);
    let (_c, ok) = counting();
    let done = fut.as_mut().poll(&mut Context::from_waker(&ok));
    assert!(matches!(done, Poll::Ready(Err(_))), "the task learns it");
    drop(fut);
    let e = tx.push_wait(3, Duration::from_secs(2)).unwrap_err();
    assert_eq!(e.error, WaitError::Disconnected);
}

/// A publication made by a drop guard while a panic unwinds (here the items a panicking
/// iterator moved in before its panic) wakes a panicking waker: that panic is contained,
/// the iterator's panic is the one that comes out, and the items are there, for both
/// rings.
#[test]
fn a_panicking_waker_woken_while_unwinding_does_not_abort() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let bad = std::task::Waker::from(std::sync::Arc::new(PanicsOnWake));
    let it = || (0..3u64).map(|i| if i == 2 { panic!("iterator panics") } else { i });
    macro_rules! check {
        ($ring:ident) => {{
            let (mut tx, mut rx) = $ring::waitable::<u64>(8).unwrap();
            rx.set_wait_strategy(REGISTER_AT_ONCE);
            let mut fut = Box::pin(rx.pop_async());
            let pending = fut.as_mut().poll(&mut Context::from_waker(&bad));
            assert!(pending.is_pending());
            let r = catch_unwind(AssertUnwindSafe(|| {
                tx.write_chunk(4).fill_from_iter(&mut it())
            }));
            let payload = r.expect_err("the iterator panicked");
            let msg = payload.downcast_ref::<&str>().copied();
            assert_eq!(msg, Some("iterator panics"), stringify!($ring));
            drop(fut);
            assert_eq!((rx.pop(), rx.pop(), rx.pop()), (Some(0), Some(1), None));
        }};
    }
    check!(spsc);
    check!(mpsc);
}

/// A `distribute` whose publication to a worker wakes that worker's panicking waker: the
/// panic is contained, the call's counters are added, and every packet comes back once.
#[test]
fn a_distribute_waking_a_panicking_waker_counts_and_loses_nothing() {
    use flowline::distributor::{self, Config};
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(2).credit(8), |p: &u64| *p).unwrap();
    // Each call publishes what it routed: this checks single calls.
    d.set_batching(1, 0);
    ws[0].set_wait_strategy(REGISTER_AT_ONCE);
    let bad = std::task::Waker::from(std::sync::Arc::new(PanicsOnWake));
    let mut b = Vec::new();
    {
        let mut fut = Box::pin(ws[0].recv_burst_async(&mut b, 8));
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&bad))
            .is_pending());
        let before = waker_panics();
        assert_eq!(d.distribute(&mut vec![1, 2, 3, 4]), Ok(4));
        assert!(
            waker_panics() > before,
            "the publication woke the panicking waker"
        );
    }
    assert_eq!(d.stats().snapshot().get("accepted"), Some(4));
    let mut got = Vec::new();
    for w in ws.iter_mut() {
        b.clear();
        w.recv_burst(&mut b, 8).unwrap();
        got.extend_from_slice(&b);
        w.done_burst(&mut b).unwrap();
    }
    got.sort_unstable();
    assert_eq!(got, [1, 2, 3, 4], "each packet reached a worker once");
    let mut out = Vec::new();
    d.flush(&mut out, Duration::from_secs(10)).unwrap();
    out.sort_unstable();
    assert_eq!(out, [1, 2, 3, 4]);
}

/// Each future's `Debug` names it as its ring's type alias does.
#[test]
fn futures_name_their_ring_in_debug() {
    let (mut tx, mut rx) = spsc::waitable::<u8>(2).unwrap();
    assert!(format!("{:?}", rx.pop_async()).starts_with("spsc::PopFuture"));
    let mut v = Vec::new();
    assert!(format!("{:?}", rx.pop_burst_async(&mut v, 2)).starts_with("spsc::PopBurstFuture"));
    assert!(format!("{:?}", tx.push_async(1)).starts_with("spsc::PushFuture"));
    let (mut tx, mut rx) = mpsc::waitable::<u8>(2).unwrap();
    assert!(format!("{:?}", rx.pop_async()).starts_with("mpsc::PopFuture"));
    assert!(format!("{:?}", tx.push_async(1)).starts_with("mpsc::PushFuture"));
}
