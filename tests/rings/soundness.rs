//! Regression tests for the soundness review: user code that panics in the middle
//! of a ring or distributor operation (a `Drop`, an iterator, the `tag` closure, a worker
//! thread), dropped handles, absurd sizes, and workers that break the hand-back order.
//! Each test failed on the code before the fix (UB under Miri, a lost packet, an abort or a
//! silent misbehaviour) and passes after. Wrap tests are in `tests/wrap.rs`.
#![cfg(all(not(loom), feature = "std"))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flowline::distributor::{self, Config, ConfigError};
use flowline::fifo::{mpsc, spsc, CapacityError};

/// An item whose drop is counted and may panic.
struct Bomb {
    id: u64,
    armed: bool,
    drops: Arc<AtomicUsize>,
}
impl Drop for Bomb {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.armed {
            self.armed = false;
            panic!("Bomb {} went off in Drop", self.id);
        }
    }
}
fn bombs(n: u64, armed: u64, drops: &Arc<AtomicUsize>) -> Vec<Bomb> {
    (0..n)
        .map(|id| Bomb {
            id,
            armed: id == armed,
            drops: drops.clone(),
        })
        .collect()
}

/// Item 1: a panicking `Drop` inside `ReadChunk::commit` used to leave the already dropped
/// items in the ring: the next pop handed one out again, the final drop freed it twice.
#[test]
fn spsc_read_chunk_commit_with_panicking_drop_consumes_each_item_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (mut tx, mut rx) = spsc::channel::<Bomb>(4).unwrap();
    // Items 0..3 straddle the end of the buffer, so both runs of the chunk are exercised.
    tx.push_bulk_iter(bombs(2, 99, &drops)).ok().unwrap();
    assert_eq!(rx.pop_burst_into(&mut Vec::new(), 2), 2);
    assert!(tx.push_bulk_iter(bombs(4, 1, &drops)).is_ok());
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    let r = catch_unwind(AssertUnwindSafe(|| rx.read_chunk(3).commit(3)));
    assert!(r.is_err(), "the armed item's Drop panics");
    assert_eq!(
        drops.load(Ordering::SeqCst),
        5,
        "each of the 3 dropped once"
    );
    assert_eq!(rx.len(), 1, "all 3 items count as consumed");
    assert_eq!(rx.pop().map(|b| b.id), Some(3));
    drop((tx, rx));
    assert_eq!(drops.load(Ordering::SeqCst), 6);
}

/// Item 1 (audit): the same for the MPSC ring's new `ReadChunk`.
#[test]
fn mpsc_read_chunk_commit_with_panicking_drop_consumes_each_item_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (mut tx, mut rx) = mpsc::channel::<Bomb>(4).unwrap();
    assert!(tx.push_bulk_iter(bombs(3, 0, &drops)).is_ok());
    let r = catch_unwind(AssertUnwindSafe(|| rx.read_chunk(2).commit(2)));
    assert!(r.is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    assert_eq!(rx.pop().map(|b| b.id), Some(2));
    assert!(rx.pop().is_none());
    drop((tx, rx));
    assert_eq!(drops.load(Ordering::SeqCst), 3);
}

/// Item 1 (audit): leftovers dropped when the last end goes, with one panicking `Drop`:
/// the others are still dropped once and the buffer is freed (Miri checks the leak).
#[test]
fn ring_drop_with_a_panicking_leftover_drops_the_rest_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (mut tx, rx) = spsc::channel::<Bomb>(4).unwrap();
    assert!(tx.push_bulk_iter(bombs(3, 1, &drops)).is_ok());
    drop(rx);
    assert!(catch_unwind(AssertUnwindSafe(move || drop(tx))).is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 3);

    let drops = Arc::new(AtomicUsize::new(0));
    let (mut tx, rx) = mpsc::channel::<Bomb>(4).unwrap();
    assert!(tx.push_bulk_iter(bombs(3, 1, &drops)).is_ok());
    drop(rx);
    assert!(catch_unwind(AssertUnwindSafe(move || drop(tx))).is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 3);
}

/// Item 1 (audit): an iterator that panics inside `fill_from_iter` / `push_burst_iter`:
/// the items moved in before the panic are published, not leaked (Miri's leak check).
#[test]
fn panicking_iterator_publishes_what_it_moved() {
    fn iter() -> impl Iterator<Item = Box<u32>> {
        (0..5u32).map(|i| {
            assert!(i != 2, "iterator fails at 2");
            Box::new(i)
        })
    }
    let (mut tx, mut rx) = spsc::channel::<Box<u32>>(8).unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| tx.push_burst_iter(&mut iter()))).is_err());
    assert_eq!(
        (rx.pop().as_deref(), rx.pop().as_deref()),
        (Some(&0), Some(&1))
    );
    assert!(rx.pop().is_none());

    let (mut tx, mut rx) = mpsc::channel::<Box<u32>>(8).unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| tx.push_burst_iter(&mut iter()))).is_err());
    assert_eq!(
        (rx.pop().as_deref(), rx.pop().as_deref()),
        (Some(&0), Some(&1))
    );
    assert!(rx.pop().is_none());
    assert!(
        tx.push(Box::new(7)).is_ok(),
        "the ring goes on after the hole"
    );
    assert_eq!(rx.pop().as_deref(), Some(&7));
}

/// Item 7: the MPSC descriptor array was built with an infallible `collect`: 2^31 slots
/// asked for 32 GiB of descriptors and aborted the process. Now the error is returned.
#[test]
#[cfg(not(miri))] // Miri's allocator would try to honour the request
fn mpsc_huge_capacity_is_an_error_not_an_abort() {
    match mpsc::channel::<[u8; 4096]>(1 << 31) {
        Err(CapacityError::AllocFailed { slots, bytes }) => {
            assert_eq!(slots, 1 << 31);
            assert!(bytes >= (1usize << 31) * 4096);
        }
        Err(e) => panic!("unexpected {e:?}"),
        Ok(_) => panic!("8 TiB of ring allocated"),
    }
    // Descriptors alone too large (u8 slots: 2 GiB of items, 32 GiB of descriptors).
    match mpsc::channel::<u8>(1 << 31) {
        Err(CapacityError::AllocFailed { .. }) | Ok(_) => {}
        Err(e) => panic!("unexpected {e:?}"),
    }
}

/// Item 8: a ring allocation failure inside `distributor::new` panicked with an internal
/// message ("credit validated above"); it is now `ConfigError::AllocFailed`.
#[test]
#[cfg(not(miri))]
fn distributor_ring_allocation_failure_is_a_config_error() {
    type Jumbo = [u8; 1 << 20];
    let r = distributor::new(Config::default().workers(2).credit(1 << 20), |_: &Jumbo| 0);
    match r {
        Err(ConfigError::AllocFailed(CapacityError::AllocFailed { .. })) => {}
        Err(e) => panic!("unexpected {e:?}"),
        Ok(_) => panic!("a terabyte of rings allocated"),
    }
    let msg =
        ConfigError::AllocFailed(CapacityError::AllocFailed { slots: 1, bytes: 1 }).to_string();
    assert!(msg.contains("smaller credit"), "{msg}");
}

/// Item 6: a panicking `tag` closure dropped the packets not yet looked at. They now stay
/// in the caller's `Vec` (the one whose tag panicked included), and the packets routed
/// before the panic are delivered by the next call.
#[test]
fn panicking_tag_closure_loses_no_packet() {
    let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(16), |p: &u64| {
        assert!(*p != 13, "tag cannot parse packet 13");
        *p % 3
    })
    .unwrap();
    // Each call publishes what it routed: this checks single calls.
    d.set_batching(1, 0);
    let mut burst: Vec<u64> = vec![10, 11, 12, 13, 14, 15];
    assert!(catch_unwind(AssertUnwindSafe(|| d.distribute(&mut burst))).is_err());
    assert_eq!(
        burst,
        [13, 14, 15],
        "untagged packets stay with the caller, in order"
    );
    burst.remove(0); // the caller drops the packet it cannot tag
    assert_eq!(d.distribute(&mut burst), Ok(2));
    let mut got = Vec::new();
    ws[0].recv_burst(&mut got, 16).unwrap();
    assert_eq!(got, [10, 11, 12, 14, 15]);
    ws[0].done_burst(&mut got).unwrap();
    let mut out = Vec::new();
    d.flush(&mut out, Duration::from_secs(5)).unwrap();
    assert_eq!(out, [10, 11, 12, 14, 15]);
}

/// `w` (the worker that did not leave) receives exactly `expected`, in order, and after it
/// hands them back the distributor returns exactly those: none lost, none duplicated.
fn all_once_in_order_at<S: distributor::Schedule<(u64, u64)>>(
    d: &mut distributor::Distributor<(u64, u64), S>,
    w: &mut distributor::Worker<(u64, u64)>,
    expected: &[(u64, u64)],
) {
    let mut got = Vec::new();
    w.recv_burst(&mut got, 16).unwrap();
    assert_eq!(
        got, expected,
        "every packet, once, in order, at the other worker"
    );
    w.done_burst(&mut got).unwrap();
    let mut out = Vec::new();
    d.flush(&mut out, Duration::from_secs(5)).unwrap();
    assert_eq!(out, expected);
}

/// A tag closure that panics once, on the packet with sequence number `at`.
fn tag_panicking_once_at(at: u64) -> impl FnMut(&(u64, u64)) -> u64 {
    let mut armed = true;
    move |p: &(u64, u64)| {
        if armed && p.1 == at {
            armed = false;
            panic!("tag cannot parse packet {at}");
        }
        p.0
    }
}

/// Item 6, second form: packets routed before a `tag` panic wait, staged, for the next
/// call. If their worker leaves in between, they must be redistributed with its other
/// packets, in order (they were lost before: pushed into the ring of a worker that left).
#[test]
fn packets_staged_before_a_tag_panic_survive_their_worker_leaving() {
    let (mut d, mut ws) = distributor::new(
        Config::default().workers(2).credit(16),
        tag_panicking_once_at(3),
    )
    .unwrap();
    // Each call publishes what it routed: this checks single calls.
    d.set_batching(1, 0);
    let w1 = ws.pop().unwrap();
    let w0 = ws.pop().unwrap();
    let mut burst: Vec<(u64, u64)> = (0..6).map(|i| (0, i)).collect();
    assert!(catch_unwind(AssertUnwindSafe(|| d.distribute(&mut burst))).is_err());
    assert_eq!(burst, [(0, 3), (0, 4), (0, 5)]);
    // Flow 0 was routed to worker 0, which leaves before the packets reach it.
    w0.leave(Vec::new()).unwrap();
    assert_eq!(d.distribute(&mut burst), Ok(3));
    let expected: Vec<(u64, u64)> = (0..6).map(|i| (0, i)).collect();
    all_once_in_order_at(&mut d, &mut { w1 }, &expected);
}

/// Item 6, third form: the order check calls `tag` on packets a leaving worker hands back
/// unprocessed. If it panics there, the packet must still be redistributed.
#[test]
fn tag_panic_on_a_packet_handed_back_unprocessed_loses_nothing() {
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (mut d, mut ws) = distributor::new(Config::default().workers(2).credit(16), {
        let armed = Arc::clone(&armed);
        move |p: &(u64, u64)| {
            if p.1 == 101 && armed.swap(false, Ordering::SeqCst) {
                panic!("tag cannot parse packet 101 now");
            }
            p.0
        }
    })
    .unwrap();
    let mut w1 = ws.pop().unwrap();
    let mut w0 = ws.pop().unwrap();
    let mut burst: Vec<(u64, u64)> = (0..4).map(|i| (0, 100 + i)).collect();
    assert_eq!(d.distribute(&mut burst), Ok(4));
    let mut held = Vec::new();
    w0.recv_burst(&mut held, 16).unwrap();
    w0.leave(held).unwrap();
    armed.store(true, Ordering::SeqCst);
    // Reading the hand-back panics at packet 101; the next call goes on from there.
    assert!(catch_unwind(AssertUnwindSafe(|| d.distribute(&mut Vec::new()))).is_err());
    assert_eq!(d.distribute(&mut Vec::new()), Ok(0));
    let expected: Vec<(u64, u64)> = (0..4).map(|i| (0, 100 + i)).collect();
    all_once_in_order_at(&mut d, &mut w1, &expected);
}

/// A worker that rewrites the field the tag reads (address translation) trips the order
/// check; with the check off, the rewritten packets come back.
#[test]
fn rewriting_the_tagged_field_needs_the_order_check_off() {
    let run = |check: bool| {
        let (mut d, mut ws) =
            distributor::new(Config::default().workers(1).credit(8), |p: &(u64, u64)| p.0).unwrap();
        // Each call publishes what it routed: this checks single calls.
        d.set_batching(1, 0);
        d.set_order_check(check);
        d.distribute(&mut vec![(1, 0), (1, 1)]).unwrap();
        let mut b = Vec::new();
        ws[0].recv_burst(&mut b, 8).unwrap();
        for p in &mut b {
            p.0 = 9; // translated
        }
        ws[0].done_burst(&mut b).unwrap();
        let mut out = Vec::new();
        catch_unwind(AssertUnwindSafe(move || {
            d.collect(&mut out);
            out
        }))
    };
    assert!(run(true).is_err(), "a changed tag looks like a reorder");
    assert_eq!(run(false).ok(), Some(vec![(9, 0), (9, 1)]));
}

/// Item 5: a worker dropped without `leave` went unnoticed: packets kept going into its
/// ring, `flush` timed out forever, `rejoin` said `Active`. Now its drop is an implicit
/// leave: what it never received is redistributed in order, what it held is counted lost.
#[test]
fn worker_thread_panicking_mid_burst_is_an_implicit_leave() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(2).credit(32), |p: &(u64, u64)| {
            p.0
        })
        .unwrap();
    let w1 = ws.pop().unwrap();
    let mut w0 = ws.pop().unwrap();
    // Flow 0 goes to worker 0 (the first least-loaded one), 20 packets.
    let mut input: Vec<(u64, u64)> = (0..20).map(|i| (0, i)).collect();
    assert_eq!(d.distribute(&mut input), Ok(20));
    let dead = std::thread::spawn(move || {
        let mut burst = Vec::new();
        w0.recv_burst(&mut burst, 8).unwrap();
        let mut first = burst.drain(..3).collect();
        w0.done_burst(&mut first).unwrap();
        panic!("worker bug while holding {} packets", burst.len());
    });
    assert!(dead.join().is_err());
    // Worker 1 takes over flow 0 once the distributor sees the leave.
    let live = std::thread::spawn(move || {
        let mut w1 = w1;
        let mut burst = Vec::new();
        let mut seen = Vec::new();
        while w1.recv_burst(&mut burst, 32).is_ok() {
            seen.extend(burst.iter().copied());
            w1.done_burst(&mut burst).unwrap();
        }
        seen
    });
    let mut out = Vec::new();
    d.flush(&mut out, Duration::from_secs(20)).unwrap();
    let stats = d.stats().snapshot();
    assert_eq!(
        stats.get("lost"),
        Some(5),
        "the 5 packets the dead worker held"
    );
    assert_eq!(d.worker_totals().get("lost"), Some(5));
    assert_eq!(d.active_workers(), 1);
    let seqs: Vec<u64> = out.iter().map(|p| p.1).collect();
    assert_eq!(seqs[..3], [0, 1, 2], "processed before the panic");
    assert!(
        seqs[3..].iter().copied().eq(8..20),
        "the rest, redistributed in order"
    );
    assert!(d.rejoin(0).is_ok(), "the dead worker's slot can be reused");
    drop(d);
    assert!(live.join().unwrap().into_iter().map(|p| p.1).eq(8..20));
}

/// Item 10: handing packets back out of order silently broke flow affinity. Now the
/// distributor checks each processed packet's tag against the one it sent at that position
/// and panics with a message naming the worker.
#[test]
#[should_panic(expected = "worker 0 handed back a packet out of order")]
fn out_of_order_hand_back_is_loud() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    // Each call publishes what it routed: this checks single calls.
    d.set_batching(1, 0);
    d.distribute(&mut vec![1, 2]).unwrap();
    let mut b = Vec::new();
    ws[0].recv_burst(&mut b, 8).unwrap();
    ws[0].done(b.pop().unwrap()).unwrap(); // packet 2 first: wrong
    ws[0].done(b.pop().unwrap()).unwrap();
    d.collect(&mut Vec::new());
}

/// Item 10: the check follows the worker's order across its two return rings (processed
/// packets on one, drops and reschedules on the other), so a correct interleaving passes.
#[test]
fn in_order_hand_back_mixing_drops_and_reschedules_passes_the_check() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &(u64, u64)| p.0).unwrap();
    let mut input: Vec<(u64, u64)> = (0..6).map(|i| (i % 3, i)).collect();
    d.distribute(&mut input).unwrap();
    let mut b = Vec::new();
    ws[0].recv_burst(&mut b, 8).unwrap();
    let mut it = b.drain(..);
    ws[0].drop_packet(it.next().unwrap()).unwrap();
    ws[0].done(it.next().unwrap()).unwrap();
    let mut p = it.next().unwrap();
    p.0 = 7;
    ws[0].reschedule(p).unwrap();
    ws[0].done(it.next().unwrap()).unwrap();
    ws[0].done(it.next().unwrap()).unwrap();
    ws[0].drop_packet(it.next().unwrap()).unwrap();
    drop(it);
    let mut out = Vec::new();
    d.collect(&mut out);
    assert_eq!(out, [(1, 1), (0, 3), (1, 4)]);
    d.distribute(&mut Vec::new()).unwrap();
    ws[0].recv_burst(&mut b, 8).unwrap();
    assert_eq!(b, [(7, 2)], "the rescheduled packet is routed again");
}

/// An MPSC ring torn down with items in several runs, the first of which panics in its
/// `Drop`: the items of the later runs are still dropped (they were leaked: the walk over
/// the runs stopped at the panic).
#[test]
fn mpsc_teardown_drops_later_runs_after_a_panicking_drop() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct Item(bool);
    impl Drop for Item {
        fn drop(&mut self) {
            if self.0 {
                panic!("item panics in drop");
            }
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    let (mut tx, rx) = mpsc::channel::<Item>(8).unwrap();
    let mut tx2 = tx.clone();
    assert!(tx.push(Item(true)).is_ok());
    assert!(tx2.push(Item(false)).is_ok());
    assert!(tx2.push(Item(false)).is_ok());
    drop((rx, tx2));
    let r = catch_unwind(AssertUnwindSafe(move || drop(tx)));
    assert!(r.is_err(), "the item's drop panicked");
    assert_eq!(
        DROPS.load(Ordering::SeqCst),
        2,
        "the later runs were dropped"
    );
}

/// A task's own waker that panics when its future yields to the executor (the spin
/// window's self-wake): the panic comes out of the poll, which took nothing, rather than
/// leaving the task pending with no wake to come; the next poll takes the item.
#[cfg(feature = "async")]
#[test]
fn a_self_wake_that_panics_comes_out_of_the_poll() {
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};
    struct Panics;
    impl Wake for Panics {
        fn wake(self: Arc<Self>) {
            panic!("waker panics in wake");
        }
    }
    let (mut tx, mut rx) = spsc::waitable::<u32>(4).unwrap();
    rx.set_wait_strategy(flowline::wait::WaitStrategy::SpinPark {
        spins: 1,
        yields: 0,
    });
    let bad = Waker::from(Arc::new(Panics));
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _ = std::pin::pin!(rx.pop_async()).poll(&mut Context::from_waker(&bad));
    }));
    assert!(r.is_err(), "the self-wake's panic reached the poller");
    tx.push(3).unwrap();
    let ok = Waker::noop();
    let p = std::pin::pin!(rx.pop_async()).poll(&mut Context::from_waker(ok));
    assert_eq!(p, Poll::Ready(Ok(3)));
}
