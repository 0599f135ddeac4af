//! Ordered distributors: one flow spread over every worker comes back in the order it was
//! accepted, whatever the workers do (a slow one, a burst handed back in reverse, a leave
//! mid-burst, a panicking one, drops and reschedules), nothing lost or duplicated, and a
//! full reorder window holds input back instead of dropping it.
#![cfg(all(not(loom), feature = "std"))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use flowline::distributor::{self, Config, ConfigError, FlushError, NoWorkers, Worker};

const LONG: Duration = Duration::from_secs(30);

fn ordered(workers: usize, credit: usize, window: usize) -> OrderedPair {
    distributor::new_ordered::<u64>(Config::default().workers(workers).credit(credit), window)
        .unwrap()
}

type OrderedPair = (
    distributor::Distributor<u64, distributor::Ordered<u64>>,
    Vec<Worker<u64>>,
);

fn recv_all(w: &mut Worker<u64>) -> Vec<u64> {
    let mut v = Vec::new();
    w.recv_burst(&mut v, usize::MAX).unwrap();
    v
}

#[test]
fn bad_windows_are_refused() {
    let c = Config::default().workers(1).credit(8);
    let e = distributor::new_ordered::<u64>(c, 0).unwrap_err();
    assert_eq!(e, ConfigError::BadWindow(0));
    assert!(e.to_string().contains("reorder window 0"));
    let big = distributor::MAX_WINDOW + 1;
    let e = distributor::new_ordered::<u64>(c, big).unwrap_err();
    assert_eq!(e, ConfigError::BadWindow(big));
    let e = distributor::new_ordered::<u64>(c.workers(0), 8).unwrap_err();
    assert_eq!(e, ConfigError::ZeroWorkers);
}

/// One flow over two workers, the one with the older packets finishing last: nothing
/// leaves before it, then everything in order; both workers got half.
#[test]
fn the_older_burst_finishing_last_holds_the_newer_one() {
    let (mut d, mut ws) = ordered(2, 8, 64);
    let mut input: Vec<u64> = (0..16).collect();
    assert_eq!(d.distribute(&mut input), Ok(16));
    let a = recv_all(&mut ws[0]);
    let b = recv_all(&mut ws[1]);
    assert_eq!((a.len(), b.len()), (8, 8));
    let (old, mut new, new_w) = if a[0] == 0 { (a, b, 1) } else { (b, a, 0) };
    ws[new_w].done_burst(&mut new).unwrap();
    let mut out = Vec::new();
    d.collect(&mut out);
    d.collect(&mut out);
    assert!(out.is_empty());
    assert_eq!(d.waiting_for_order(), 8);
    assert_eq!(d.in_flight(), 8);
    let mut old = old;
    ws[1 - new_w].done_burst(&mut old).unwrap();
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out, (0..16).collect::<Vec<_>>());
    assert_eq!(d.waiting_for_order(), 0);
}

#[test]
fn a_burst_handed_back_in_reverse_comes_out_in_order() {
    let (mut d, mut ws) = ordered(1, 32, 32);
    let mut w = ws.pop().unwrap();
    d.distribute(&mut (0..32).collect()).unwrap();
    let first = w.next_ticket();
    let got = recv_all(&mut w);
    let mut out = Vec::new();
    for (k, p) in got.into_iter().enumerate().rev() {
        w.done_at(first.nth(k), p).unwrap();
        d.collect(&mut out);
        assert_eq!(out.len(), usize::from(k == 0) * 32, "released early");
    }
    assert_eq!(out, (0..32).collect::<Vec<_>>());
}

/// Drops give their slot up; a rescheduled packet is a new arrival, after what was
/// accepted before it came back.
#[test]
fn drops_and_reschedules_give_their_places_up() {
    let (mut d, mut ws) = ordered(1, 16, 16);
    let mut w = ws.pop().unwrap();
    d.distribute(&mut (0..6).collect()).unwrap();
    let got = recv_all(&mut w);
    for p in got {
        match p {
            1 => w.reschedule(p).unwrap(),
            3 => w.drop_packet(p).unwrap(),
            _ => w.done(p).unwrap(),
        }
    }
    let mut out = Vec::new();
    d.distribute(&mut vec![6, 7]).unwrap();
    // 1 went back into the order behind 6 and 7 (it was read by this call, before them).
    let got = recv_all(&mut w);
    w.done_burst(&mut got.clone()).unwrap();
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out, [0, 2, 4, 5, 1, 6, 7]);
    let s = d.stats().snapshot();
    assert_eq!((s.get("dropped"), s.get("rescheduled")), (Some(1), Some(1)));
}

/// A window of 4 with credit to spare: admission stops at 4 packets not released, the
/// rest stays with the caller, and goes once the oldest is back.
#[test]
fn a_full_window_holds_input_back_and_drops_nothing() {
    let (mut d, mut ws) = ordered(2, 8, 4);
    d.set_batching(1, 0);
    let mut input: Vec<u64> = (0..10).collect();
    assert_eq!(d.distribute(&mut input), Ok(4));
    assert_eq!(input, (4..10).collect::<Vec<_>>());
    assert_eq!(d.stats().snapshot().get("backpressured"), Some(6));
    let mut held: Vec<Vec<u64>> = ws.iter_mut().map(recv_all).collect();
    // Everything but packet 0 comes back: still full.
    let zero_at = held.iter().position(|h| h.contains(&0)).unwrap();
    let other = 1 - zero_at;
    let mut others = std::mem::take(&mut held[other]);
    ws[other].done_burst(&mut others).unwrap();
    let rest: Vec<u64> = held[zero_at].split_off(1);
    let first = ws[zero_at].next_ticket();
    let n = rest.len() + 1;
    let base = first.back(n);
    for (k, p) in rest.into_iter().enumerate() {
        ws[zero_at].done_at(base.nth(k + 1), p).unwrap();
    }
    let mut out = Vec::new();
    d.collect(&mut out);
    assert_eq!(d.distribute(&mut input), Ok(0));
    assert!(out.is_empty());
    ws[zero_at].done(0).unwrap();
    assert_eq!(d.distribute(&mut input), Ok(4));
    d.collect(&mut out);
    assert_eq!(out, [0, 1, 2, 3]);
    for w in ws.iter_mut() {
        let mut b = recv_all(w);
        w.done_burst(&mut b).unwrap();
    }
    d.flush(&mut out, LONG).unwrap();
    while !input.is_empty() {
        d.distribute(&mut input).unwrap();
        for w in ws.iter_mut() {
            let mut b = recv_all(w);
            w.done_burst(&mut b).unwrap();
        }
    }
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out, (0..10).collect::<Vec<_>>());
}

/// A worker leaves mid-burst: what it processed comes back, what it had not (and what it
/// never received) goes to the other worker and keeps its place.
#[test]
fn a_worker_that_leaves_mid_burst_keeps_the_order() {
    let (mut d, mut ws) = ordered(2, 8, 64);
    d.set_batching(1, 0);
    d.distribute(&mut (0..16).collect()).unwrap();
    let mut w1 = ws.pop().unwrap();
    let mut w0 = ws.pop().unwrap();
    let mut got = Vec::new();
    w0.recv_burst(&mut got, 3).unwrap();
    let unprocessed = got.split_off(1);
    w0.done(got[0]).unwrap();
    w0.leave(unprocessed).unwrap();
    let mut out = Vec::new();
    for _ in 0..100 {
        d.distribute(&mut Vec::new()).unwrap();
        let mut b = recv_all(&mut w1);
        w1.done_burst(&mut b).unwrap();
        d.collect(&mut out);
        if d.in_flight() == 0 {
            break;
        }
    }
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out, (0..16).collect::<Vec<_>>());
    assert_eq!(d.worker_completed(1), Some(15));
}

/// A worker thread that panics holding packets: they are lost (counted), their places
/// are given up, everything else comes out in order and the window keeps moving.
#[test]
fn a_panicking_worker_loses_only_what_it_held() {
    let (mut d, mut ws) = ordered(2, 8, 16);
    d.set_batching(1, 0);
    d.distribute(&mut (0..16).collect()).unwrap();
    let mut w1 = ws.pop().unwrap();
    let w0 = ws.pop().unwrap();
    let r = catch_unwind(AssertUnwindSafe(move || {
        let mut w0 = w0;
        let mut got = Vec::new();
        w0.recv_burst(&mut got, 2).unwrap();
        w0.done(got[0]).unwrap();
        panic!("worker code failed");
    }));
    assert!(r.is_err());
    let mut out = Vec::new();
    let mut input: Vec<u64> = (16..40).collect();
    while !input.is_empty() || d.in_flight() > 0 {
        d.distribute(&mut input).unwrap();
        let mut b = recv_all(&mut w1);
        w1.done_burst(&mut b).unwrap();
        d.collect(&mut out);
    }
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(d.stats().snapshot().get("lost"), Some(1));
    let mut want: Vec<u64> = (0..40).collect();
    let lost: Vec<u64> = want.iter().copied().filter(|p| !out.contains(p)).collect();
    assert_eq!(lost.len(), 1, "one lost: {lost:?}");
    want.retain(|p| !lost.contains(p));
    assert_eq!(out, want);
}

/// The last worker leaves holding packets: they come back with `NoWorkers`, their places
/// are given up (so what was handed back before is released), and after a re-join the
/// window goes on.
#[test]
fn no_workers_gives_the_packets_back_and_frees_their_places() {
    let (mut d, mut ws) = ordered(1, 8, 8);
    let w = ws.pop().unwrap();
    d.distribute(&mut (0..4).collect()).unwrap();
    let mut w = w;
    let mut got = recv_all(&mut w);
    let first = w.next_ticket().back(4);
    w.done_at(first.nth(3), 3).unwrap(); // waits for 0..3
    got.truncate(3);
    w.leave(got).unwrap();
    let mut back = Vec::new();
    assert_eq!(d.distribute(&mut back), Err(NoWorkers));
    assert_eq!(back, [0, 1, 2]);
    let mut out = Vec::new();
    assert_eq!(
        d.flush(&mut out, LONG),
        Err(FlushError::NoWorkers(Vec::new()))
    );
    assert_eq!(out, [3]);
    let mut w = d.rejoin(0).unwrap();
    let mut input: Vec<u64> = (10..20).collect();
    d.distribute(&mut input).unwrap();
    let mut b = recv_all(&mut w);
    w.done_burst(&mut b).unwrap();
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out[1..], (10..18).collect::<Vec<_>>()[..]);
}

/// Marks a packet a worker rescheduled (accepted again, as new).
const RESCHEDULED: u64 = 1 << 63;

/// Threads: one flow over three workers, one slow and dropping some, one handing bursts
/// back in reverse, one rescheduling some: every packet comes out once (less the dropped),
/// in acceptance order (packets never rescheduled in input order), and the workers share
/// the flow.
#[test]
fn one_flow_over_three_busy_workers() {
    let n: u64 = if cfg!(miri) { 300 } else { 60_000 };
    let (mut d, ws) = ordered(3, 32, 256);
    let threads: Vec<_> = ws
        .into_iter()
        .map(|w| {
            std::thread::spawn(move || {
                let mut w = w;
                let mut burst = Vec::new();
                let mut k = 0u64;
                loop {
                    let first = w.next_ticket();
                    match w.recv_burst_wait(&mut burst, 16, Duration::from_millis(50)) {
                        Ok(_) => {}
                        Err(flowline::wait::WaitError::Timeout) => continue,
                        Err(_) => return w,
                    }
                    k += 1;
                    match w.id() {
                        0 => {
                            if k % 8 == 0 {
                                std::thread::sleep(Duration::from_micros(200));
                            }
                            for p in burst.drain(..) {
                                if p % 97 == 5 {
                                    w.drop_packet(p).unwrap();
                                } else {
                                    w.done(p).unwrap();
                                }
                            }
                        }
                        1 => {
                            let v = std::mem::take(&mut burst);
                            for (i, p) in v.into_iter().enumerate().rev() {
                                w.done_at(first.nth(i), p).unwrap();
                            }
                        }
                        _ => {
                            for p in burst.drain(..) {
                                if p % 89 == 3 {
                                    // Re-accepted as new: marked, so the check knows it.
                                    w.reschedule(p | RESCHEDULED).unwrap();
                                } else {
                                    w.done(p).unwrap();
                                }
                            }
                        }
                    }
                }
            })
        })
        .collect();
    let mut input: Vec<u64> = (0..n).collect();
    let mut out = Vec::new();
    while !input.is_empty() {
        let take = input.len().min(64);
        let mut chunk: Vec<u64> = input.drain(..take).collect();
        d.distribute_wait(&mut chunk, LONG).unwrap();
        let rest = std::mem::take(&mut input);
        input = chunk;
        input.extend(rest);
        d.collect(&mut out);
    }
    d.flush(&mut out, LONG).unwrap();
    let dropped = d.stats().snapshot().get("dropped").unwrap();
    let mut last = None;
    for &p in out.iter().filter(|&&p| p & RESCHEDULED == 0) {
        assert!(last < Some(p), "{p} after {last:?}");
        last = Some(p);
    }
    let mut again: Vec<u64> = out
        .iter()
        .filter(|&&p| p & RESCHEDULED != 0)
        .copied()
        .collect();
    let n_again = again.len();
    again.sort_unstable();
    again.dedup();
    assert_eq!(again.len(), n_again, "a rescheduled packet came back twice");
    assert!(n_again > 0 || cfg!(miri));
    assert_eq!(out.len() as u64 + dropped, n);
    let shares: Vec<u64> = (0..3).map(|i| d.worker_completed(i).unwrap()).collect();
    drop(d);
    for t in threads {
        t.join().unwrap();
    }
    if !cfg!(miri) {
        assert!(shares.iter().all(|&s| s > n / 20), "shares {shares:?}");
    }
}

/// `collect_wait` whose own read finds the last worker gone (its leave unread until then,
/// packets staged): the packets that worker did not process keep their places, so the
/// one it handed back out of order waits for them, and after a re-join everything comes
/// out in acceptance order.
#[test]
fn collect_wait_finding_the_last_leave_keeps_the_order() {
    let (mut d, mut ws) = ordered(1, 16, 8);
    let mut w = ws.pop().unwrap();
    d.distribute(&mut (0..4).collect()).unwrap();
    let got = recv_all(&mut w);
    assert_eq!(got, [0, 1, 2, 3]);
    let first = w.next_ticket().back(4);
    // A batch of input: staged, and the lane is not due, so `collect` alone reads nothing.
    let mut input: Vec<u64> = (4..12).collect();
    assert_eq!(d.distribute(&mut input), Ok(4));
    w.done_at(first.nth(3), 3).unwrap();
    w.leave(vec![0, 1, 2]).unwrap();
    let mut out = Vec::new();
    let _ = d.collect_wait(&mut out, Duration::from_millis(100));
    assert!(out.is_empty(), "released before older packets: {out:?}");
    let mut w = d.rejoin(0).unwrap();
    input.extend(12..16);
    for _ in 0..100 {
        d.distribute(&mut input).unwrap();
        let mut b = recv_all(&mut w);
        w.done_burst(&mut b).unwrap();
        d.collect(&mut out);
        if input.is_empty() && d.in_flight() == 0 {
            break;
        }
    }
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out, (0..16).collect::<Vec<_>>());
}

/// A window that is not a multiple of the lane batch: once it is full, what is staged goes
/// out at once (more cannot be gathered), so a busy loop of `distribute` and `collect`
/// does not wait the hold for it.
#[test]
fn a_full_window_publishes_what_is_staged() {
    let (mut d, mut ws) = ordered(1, 64, 16);
    // Batch 32 > window 16: every call that fills the window must publish. (Fewer
    // packets under Miri: the same calls, interpreted.)
    let n: u64 = if cfg!(miri) { 200 } else { 2000 };
    let mut input: Vec<u64> = (0..n).collect();
    let (mut out, mut calls) = (Vec::new(), 0);
    while out.len() < n as usize {
        calls += 1;
        assert!(calls < n / 5, "{} back after {calls} calls", out.len());
        d.distribute(&mut input).unwrap();
        let mut b = recv_all(&mut ws[0]);
        ws[0].done_burst(&mut b).unwrap();
        d.collect(&mut out);
    }
    assert_eq!(out, (0..n).collect::<Vec<_>>());
}

/// A forgotten worker handle holding the oldest packet: it never comes back, so once the
/// window is full the distributor accepts nothing more (input stays with the caller), a
/// flush times out naming that worker, and nothing is lost or released out of order.
#[test]
fn a_forgotten_worker_holding_the_oldest_packet_fills_the_window() {
    let (mut d, mut ws) = ordered(2, 8, 8);
    d.set_batching(1, 0);
    d.distribute(&mut (0..2).collect()).unwrap();
    let mut w1 = ws.pop().unwrap();
    let mut w0 = ws.pop().unwrap();
    assert_eq!(recv_all(&mut w0), [0]);
    // As forgotten while the rest runs (dropped at the end, so nothing leaks).
    let w0 = std::mem::ManuallyDrop::new(w0);
    let mut input: Vec<u64> = (2..20).collect();
    let mut out = Vec::new();
    for _ in 0..50 {
        d.distribute(&mut input).unwrap();
        let mut b = recv_all(&mut w1);
        w1.done_burst(&mut b).unwrap();
        d.collect(&mut out);
    }
    assert!(out.is_empty(), "released ahead of packet 0: {out:?}");
    // Eight accepted (the window): 0 held, the others handed back by worker 1 or sent to
    // worker 0's ring behind it; the rest stays with the caller.
    assert_eq!(input, (8..20).collect::<Vec<_>>());
    let waiting = d.waiting_for_order();
    assert!(waiting >= 1);
    assert_eq!(waiting + d.in_flight(), 8);
    let e = d.flush(&mut out, Duration::from_millis(20));
    assert_eq!(
        e,
        Err(FlushError::Timeout {
            in_flight: 8 - waiting,
            workers: vec![0]
        })
    );
    assert!(out.is_empty());
    drop(std::mem::ManuallyDrop::into_inner(w0));
}
