//! The distributor's waiting calls, `distribute_wait` and `collect_wait`: they end when a
//! hand-back makes progress possible (a completion, a leave, a dropped handle, a
//! reschedule), also when it comes exactly while the distributor sleeps, and they lose
//! nothing when they time out or find no worker.
#![cfg(all(not(loom), feature = "std"))]

use std::time::{Duration, Instant};

use flowline::distributor::{self, Config, Worker};
use flowline::wait::{WaitError, WaitStrategy};

const LONG: Duration = Duration::from_secs(30);

fn recv_all<T>(w: &mut Worker<T>) -> Vec<T> {
    let mut v = Vec::new();
    w.recv_burst(&mut v, usize::MAX).unwrap();
    v
}

/// Spins until the distributor's thread sleeps in a wait (the worker sees its sleeper).
fn until_asleep<T>(w: &Worker<T>) {
    let start = Instant::now();
    while !w.flush_is_asleep() {
        assert!(
            start.elapsed() < LONG,
            "the distributor never went to sleep"
        );
        std::thread::yield_now();
    }
}

/// Every strategy reaches the hand-back: spin, yield, and sleep (where the test hands
/// back exactly while the distributor sleeps).
#[test]
fn distribute_wait_ends_when_a_worker_hands_back() {
    for strategy in [
        WaitStrategy::Spin,
        WaitStrategy::SpinYield { spins: 16 },
        WaitStrategy::SpinPark {
            spins: 16,
            yields: 2,
        },
    ] {
        let (mut d, mut ws) =
            distributor::new(Config::default().workers(1).credit(4), |p: &u64| *p).unwrap();
        d.set_wait_strategy(strategy);
        let mut w = ws.pop().unwrap();
        assert_eq!(d.distribute(&mut vec![1, 1, 1, 1]), Ok(4));
        let t = std::thread::spawn(move || {
            let b = recv_all(&mut w);
            assert_eq!(b.len(), 4);
            if matches!(strategy, WaitStrategy::SpinPark { .. }) {
                until_asleep(&w);
            } else {
                std::thread::sleep(Duration::from_millis(20));
            }
            w.done(b[0]).unwrap();
            (w, b)
        });
        let mut more = vec![1, 2];
        let start = Instant::now();
        // Out of credit until the worker hands one back: then flow 1's next packet fits
        // (and flow 2's waits behind no one but has no credit either).
        assert_eq!(d.distribute_wait(&mut more, LONG), Ok(1));
        assert!(start.elapsed() < LONG);
        assert_eq!(more, [2]);
        let (mut w, b) = t.join().unwrap();
        let mut rest: Vec<u64> = b.into_iter().skip(1).chain(recv_all(&mut w)).collect();
        w.done_burst(&mut rest).unwrap();
        let mut out = Vec::new();
        d.flush(&mut out, LONG).unwrap_or_else(|_| panic!("flush"));
        assert_eq!(out, [1; 5]);
        drop(w);
    }
}

#[test]
fn distribute_wait_times_out_and_keeps_the_packets() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(2), |p: &u64| *p).unwrap();
    let mut w = ws.pop().unwrap();
    let mut input = vec![5, 6, 7];
    assert_eq!(d.distribute(&mut input), Ok(2));
    assert_eq!(
        d.distribute_wait(&mut input, Duration::from_millis(20)),
        Err(WaitError::Timeout)
    );
    assert_eq!(input, [7]);
    // Nothing was lost or duplicated: the worker got the two placed, then the third.
    let got = recv_all(&mut w);
    assert_eq!(got, [5, 6]);
    w.done_burst(&mut got.clone()).unwrap();
    assert_eq!(d.distribute_wait(&mut input, LONG), Ok(1));
    assert!(input.is_empty());
    assert_eq!(
        d.distribute_wait(&mut input, LONG),
        Ok(0),
        "nothing to place"
    );
}

/// A dropped handle and a leave end the wait: when the last worker leaves, the packets
/// come back with `Disconnected` (the leaving worker's unprocessed ones first).
#[test]
fn distribute_wait_ends_when_workers_leave() {
    let (mut d, ws) =
        distributor::new(Config::default().workers(2).credit(2), |p: &u64| *p).unwrap();
    d.set_wait_strategy(WaitStrategy::SpinPark {
        spins: 4,
        yields: 1,
    });
    // Both workers out of credit (flows 0 and 1 on one each).
    let mut input = vec![0, 0, 1, 1, 0, 1];
    assert_eq!(d.distribute(&mut input), Ok(4));
    assert_eq!(input, [0, 1]);
    let t = std::thread::spawn(move || {
        let mut ws = ws;
        until_asleep(&ws[0]);
        let mut last = ws.pop().unwrap();
        let mut first = ws.pop().unwrap();
        // Dropped while holding its 2 packets (as by a thread that panicked): they count
        // as lost, its flow is free, but the other worker has no credit: the wait goes on.
        assert_eq!(recv_all(&mut first).len(), 2);
        drop(first);
        let b = recv_all(&mut last);
        assert_eq!(b.len(), 2);
        until_asleep(&last);
        let mut left = b.clone();
        last.leave(b).unwrap();
        left.sort_unstable();
        left
    });
    assert_eq!(
        d.distribute_wait(&mut input, LONG),
        Err(WaitError::Disconnected)
    );
    let handed_back = t.join().unwrap();
    assert_eq!(input.len(), 4, "{input:?}");
    assert_eq!(input[..2], handed_back[..], "the unprocessed packets first");
    assert_eq!(input[2..], [0, 1]);
    assert_eq!(d.stats().snapshot().get("lost"), Some(2));
}

#[test]
fn collect_wait_returns_what_comes_back_and_routes_reschedules() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p % 100).unwrap();
    let mut out = Vec::new();
    assert_eq!(d.collect_wait(&mut out, LONG), Ok(0), "nothing in flight");
    let mut w = ws.pop().unwrap();
    d.distribute(&mut vec![1, 2]).unwrap();
    assert_eq!(
        d.collect_wait(&mut out, Duration::from_millis(10)),
        Err(WaitError::Timeout)
    );
    let t = std::thread::spawn(move || {
        let b = recv_all(&mut w);
        assert_eq!(b, [1, 2]);
        until_asleep(&w);
        // Packet 1 rescheduled as 101 (the same tag): the waiting distributor routes it
        // from its backlog, and it comes back after 2.
        w.reschedule(101).unwrap();
        w.done(2).unwrap();
        let mut v = Vec::new();
        w.recv_burst_wait(&mut v, 8, LONG).unwrap();
        assert_eq!(v, [101]);
        w.done(101).unwrap();
        w
    });
    while out.len() < 2 {
        d.collect_wait(&mut out, LONG).unwrap();
    }
    assert_eq!(out, [2, 101]);
    let w = t.join().unwrap();
    assert_eq!(d.in_flight(), 0);
    assert_eq!(d.collect_wait(&mut out, LONG), Ok(0));
    drop(w);
    d.distribute(&mut vec![3]).unwrap_err();
}

#[test]
fn collect_wait_with_no_worker_left_is_disconnected() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    d.distribute(&mut vec![1, 2]).unwrap();
    let mut w = ws.pop().unwrap();
    let t = std::thread::spawn(move || {
        let b = recv_all(&mut w);
        until_asleep(&w);
        w.leave(b).unwrap();
    });
    let mut out = Vec::new();
    assert_eq!(d.collect_wait(&mut out, LONG), Err(WaitError::Disconnected));
    t.join().unwrap();
    assert!(out.is_empty());
    // The unprocessed packets wait in the backlog: the flush gives them back.
    let e = d.flush(&mut out, LONG).unwrap_err();
    assert_eq!(e, distributor::FlushError::NoWorkers(vec![1, 2]));
}

/// Packets staged on one lane (batching) reach their worker while the distributor waits
/// for another lane's credit.
#[test]
fn staged_packets_go_out_before_the_distributor_sleeps() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(2).credit(64), |p: &u64| *p).unwrap();
    d.set_wait_strategy(WaitStrategy::SpinPark {
        spins: 0,
        yields: 0,
    });
    // Flow 0 fills one worker; flow 1's five packets are staged on the other's lane.
    let mut input: Vec<u64> = std::iter::repeat(0).take(70).chain([1; 5]).collect();
    d.distribute(&mut input).unwrap();
    let mut more: Vec<u64> = vec![0; 40];
    assert_eq!(
        d.distribute_wait(&mut more, Duration::from_millis(20)),
        Err(WaitError::Timeout)
    );
    let got: Vec<usize> = ws.iter_mut().map(|w| recv_all(w).len()).collect();
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [5, 64], "{got:?}");
}

/// A worker's wait for at most 0 packets takes none and returns at once, whether or not
/// packets are there (as `recv_burst` with `max` 0).
#[test]
fn recv_burst_wait_for_zero_packets_returns_at_once() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(4), |p: &u64| *p).unwrap();
    let mut w = ws.pop().unwrap();
    let mut b = Vec::new();
    assert_eq!(w.recv_burst_wait(&mut b, 0, Duration::MAX), Ok(0));
    d.distribute(&mut vec![1]).unwrap();
    assert_eq!(w.recv_burst_wait(&mut b, 0, Duration::MAX), Ok(0));
    assert_eq!(w.recv_burst_wait(&mut b, 1, Duration::MAX), Ok(1));
    assert_eq!(b, [1]);
}

/// Two tags node 0 of a two-node layout owns.
fn owned_by_node_0(
    n0: &flowline::distributor::nodes::NodeDistributor<u64, fn(&u64) -> u64>,
) -> [u64; 2] {
    let mut it = (0u64..).filter(|&t| n0.owns(t));
    [it.next().unwrap(), it.next().unwrap()]
}

/// A node asleep in `collect_wait` (its worker holds its one packet) places a packet
/// that comes over a bridge from the other node: the push wakes it, it reads the bridge
/// and hands the packet to its worker; both come back, in order.
#[test]
fn a_sleeping_node_places_what_comes_over_a_bridge() {
    use crate::support::nodes_layout::two_nodes_single_calls;
    let tag: fn(&u64) -> u64 = |p| *p;
    let ((mut n1, _w1), (mut n0, mut w0)) = two_nodes_single_calls(1, 8, 8, tag);
    let [a, b] = owned_by_node_0(&n0);
    n0.distribute(&mut vec![a]).unwrap();
    let mut first = recv_all(&mut w0[0]);
    assert_eq!(first, [a]);
    let t = std::thread::spawn(move || {
        let mut out = Vec::new();
        let r = n0.collect_wait(&mut out, LONG);
        (r, out, n0)
    });
    until_asleep(&w0[0]);
    assert_eq!(n1.distribute(&mut vec![b]), Ok(1)); // onto the bridge to node 0
    let start = Instant::now();
    let mut second = Vec::new();
    while second.is_empty() {
        assert!(
            start.elapsed() < LONG,
            "the bridged packet never reached the worker"
        );
        w0[0].recv_burst(&mut second, 8).unwrap();
        std::thread::yield_now();
    }
    assert_eq!(second, [b]);
    w0[0].done_burst(&mut first).unwrap();
    w0[0].done_burst(&mut second).unwrap();
    let (r, mut out, mut n0) = t.join().unwrap();
    assert!(r.unwrap() >= 1);
    while out.len() < 2 {
        n0.collect_wait(&mut out, LONG).unwrap();
    }
    assert_eq!(out, [a, b]);
    assert_eq!(
        n0.collect_wait(&mut out, LONG),
        Ok(0),
        "nothing held any more"
    );
}

/// A node's `distribute_wait` with its worker out of credit sleeps until the worker hands
/// back, then places the packet.
#[test]
fn a_node_s_distribute_wait_ends_when_its_worker_hands_back() {
    use crate::support::nodes_layout::two_nodes_single_calls;
    let tag: fn(&u64) -> u64 = |p| *p;
    let ((_n1, _w1), (mut n0, mut w0)) = two_nodes_single_calls(1, 1, 8, tag);
    let [a, _] = owned_by_node_0(&n0);
    n0.distribute(&mut vec![a]).unwrap();
    let t = std::thread::spawn(move || {
        let mut input = vec![a];
        let r = n0.distribute_wait(&mut input, LONG);
        (r, input, n0)
    });
    until_asleep(&w0[0]);
    let mut held = recv_all(&mut w0[0]);
    w0[0].done_burst(&mut held).unwrap();
    let (r, input, _n0) = t.join().unwrap();
    assert_eq!((r, input.len()), (Ok(1), 0));
    assert_eq!(recv_all(&mut w0[0]), [a]);
}

/// A node's waits time out with nothing lost, and without workers they give up at once,
/// handing the input back.
#[test]
fn a_node_s_waits_time_out_and_give_back_without_workers() {
    use crate::support::nodes_layout::two_nodes_single_calls;
    let tag: fn(&u64) -> u64 = |p| *p;
    let ((_n1, _w1), (mut n0, mut w0)) = two_nodes_single_calls(1, 1, 8, tag);
    let [a, b] = owned_by_node_0(&n0);
    n0.distribute(&mut vec![a]).unwrap();
    let mut out = Vec::new();
    let short = Duration::from_millis(5);
    assert_eq!(n0.collect_wait(&mut out, short), Err(WaitError::Timeout));
    let mut input = vec![b];
    assert_eq!(
        n0.distribute_wait(&mut input, short),
        Err(WaitError::Timeout)
    );
    assert_eq!(input, [b]);
    let mut held = recv_all(&mut w0[0]);
    w0[0].done_burst(&mut held).unwrap();
    assert_eq!(n0.collect_wait(&mut out, LONG), Ok(1));
    assert_eq!(out, [a]);
    drop(w0);
    assert_eq!(
        n0.distribute_wait(&mut input, LONG),
        Err(WaitError::Disconnected)
    );
    assert_eq!(input, [b], "given back");
    assert_eq!(n0.collect_wait(&mut out, LONG), Ok(0));
}

/// A leave that a node's `collect_wait` reads in its own poll takes its last worker: the
/// packet handed back unprocessed stays at the node (the wait ends `Disconnected`), and the
/// next `distribute` gives it back, once; the node then holds nothing.
#[test]
fn a_leave_read_in_a_node_s_collect_wait_keeps_the_packet_for_the_next_call() {
    use crate::support::nodes_layout::two_nodes_single_calls;
    use flowline::distributor::NoWorkers;
    let tag: fn(&u64) -> u64 = |p| *p;
    let ((_n1, _w1), (mut n0, mut w0)) = two_nodes_single_calls(1, 8, 8, tag);
    let [a, _] = owned_by_node_0(&n0);
    n0.distribute(&mut vec![a]).unwrap();
    let held = recv_all(&mut w0[0]);
    w0.pop().unwrap().leave(held).unwrap();
    let mut out = Vec::new();
    assert_eq!(
        n0.collect_wait(&mut out, LONG),
        Err(WaitError::Disconnected)
    );
    assert!(out.is_empty());
    assert_eq!(n0.held(), 1, "the packet stays at the node");
    let mut back = Vec::new();
    assert_eq!(n0.distribute(&mut back), Err(NoWorkers));
    assert_eq!(back, [a], "given back once");
    assert_eq!(n0.held(), 0);
    back.clear();
    assert_eq!(n0.distribute(&mut back), Err(NoWorkers));
    assert!(back.is_empty(), "not twice");
}
