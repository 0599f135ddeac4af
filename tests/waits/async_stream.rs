//! `ItemStream` (feature `stream`): the waitable consumers of both rings as a
//! `futures_core::Stream`, against the same item sequence read by `pop`.

#![cfg(all(not(loom), feature = "stream"))]

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::stream::FusedStream;
use futures_core::Stream;

use crate::support;

use flowline::fifo::{mpsc, spsc};
use flowline::wait::block_on;
use support::waker::{counting, REGISTER_AT_ONCE};

/// Every item of `s` until it ends, awaited on this thread.
fn collect<S: Stream + Unpin>(s: &mut S) -> Vec<S::Item> {
    block_on(async {
        let mut v = Vec::new();
        while let Some(x) = std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await {
            v.push(x);
        }
        v
    })
}

#[test]
fn spsc_stream_yields_every_item_in_order_then_ends_for_good() {
    const N: u64 = 100_000;
    let (mut tx, rx) = spsc::waitable::<u64>(64).unwrap();
    let t = std::thread::spawn(move || {
        for i in 0..N {
            tx.push_wait(i, Duration::MAX).unwrap();
            if i % 1000 == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    });
    let mut s = rx.into_stream();
    assert!(!s.is_terminated());
    let got = collect(&mut s);
    t.join().unwrap();
    assert_eq!(got, (0..N).collect::<Vec<_>>());
    assert!(s.is_terminated());
    // Fused: `None` again, without touching the ring.
    let (_c, w) = counting();
    assert_eq!(
        Pin::new(&mut s).poll_next(&mut Context::from_waker(&w)),
        Poll::Ready(None)
    );
}

#[test]
fn mpsc_stream_keeps_each_producers_order_and_ends_when_all_are_gone() {
    const N: u64 = 50_000;
    let (tx, rx) = mpsc::waitable::<(u8, u64)>(32).unwrap();
    let ts: Vec<_> = (0..2u8)
        .map(|p| {
            let mut tx = tx.clone();
            std::thread::spawn(move || {
                for i in 0..N {
                    tx.push_wait((p, i), Duration::MAX).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let got = collect(&mut rx.into_stream());
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(got.len() as u64, 2 * N);
    let mut next = [0u64; 2];
    for (p, i) in got {
        assert_eq!(i, next[p as usize], "producer {p}'s order");
        next[p as usize] += 1;
    }
}

#[test]
fn a_pending_stream_is_woken_once_and_into_inner_withdraws_its_registration() {
    let (mut tx, mut rx) = spsc::waitable::<u32>(4).unwrap();
    rx.set_wait_strategy(REGISTER_AT_ONCE);
    let mut s = rx.into_stream();
    let (a, wa) = counting();
    let mut cx = Context::from_waker(&wa);
    assert!(Pin::new(&mut s).poll_next(&mut cx).is_pending());
    tx.push(1).unwrap();
    assert_eq!(a.0.load(Ordering::SeqCst), 1, "the push woke the stream");
    assert_eq!(Pin::new(&mut s).poll_next(&mut cx), Poll::Ready(Some(1)));
    // Pending again, then handed back: the next push wakes nobody, and the item waits.
    assert!(Pin::new(&mut s).poll_next(&mut cx).is_pending());
    let mut rx = s.into_inner();
    tx.push(2).unwrap();
    assert_eq!(
        a.0.load(Ordering::SeqCst),
        1,
        "the withdrawn registration is not woken"
    );
    assert_eq!(rx.pop(), Some(2));
    // A pending stream dropped likewise withdraws its registration.
    let mut s = rx.into_stream();
    assert!(Pin::new(&mut s).poll_next(&mut cx).is_pending());
    drop(s);
    assert!(tx.is_abandoned());
    assert_eq!(a.0.load(Ordering::SeqCst), 1);
}

#[test]
fn items_left_behind_a_dropped_stream_are_dropped_once_with_the_ring() {
    let (mut tx, rx) = spsc::waitable::<Arc<()>>(8).unwrap();
    let item = Arc::new(());
    for _ in 0..5 {
        tx.push(item.clone()).unwrap();
    }
    let mut s = rx.into_stream();
    let (_c, w) = counting();
    assert!(matches!(
        Pin::new(&mut s).poll_next(&mut Context::from_waker(&w)),
        Poll::Ready(Some(_))
    ));
    assert_eq!(Arc::strong_count(&item), 5);
    drop(s);
    assert!(tx.is_abandoned());
    assert_eq!(Arc::strong_count(&item), 5, "still in the ring");
    drop(tx);
    assert_eq!(Arc::strong_count(&item), 1);
}

/// The stream shares its consumer's cooperative budget: after `budget` items in a row it
/// yields once (waking its own task, taking nothing), then goes on in order.
#[test]
fn a_stream_of_ready_items_yields_after_its_budget() {
    let (mut tx, mut rx) = mpsc::waitable::<u32>(8).unwrap();
    rx.set_async_budget(3);
    for v in 0..7 {
        tx.push(v).unwrap();
    }
    let mut s = rx.into_stream();
    let (wakes, w) = counting();
    let mut cx = Context::from_waker(&w);
    let mut got = Vec::new();
    let mut yields = Vec::new();
    while got.len() < 7 {
        match Pin::new(&mut s).poll_next(&mut cx) {
            Poll::Ready(Some(v)) => got.push(v),
            Poll::Pending => yields.push(got.len()),
            Poll::Ready(None) => unreachable!("the producer is still there"),
        }
    }
    assert_eq!(got, (0..7).collect::<Vec<_>>());
    assert_eq!(yields, [3, 6]);
    assert_eq!(
        wakes.0.load(Ordering::SeqCst),
        2,
        "each yield woke the task"
    );
}
