//! Workers added at run time and removed for good: order, exactly once, ids and counters.
#![cfg(all(not(loom), feature = "std"))]

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flowline::distributor::{self, Config, ConfigError, JoinError, Worker};

use super::guarantees::{recv_all, tag, Checker, Pkt, WAIT};
use crate::support::rng::Rng;

// ---- workers added at run time and removed for good ------------------------------------

/// A distributor that starts with one worker gains workers at run time and loses them for
/// good under load: each worker leaves after a few bursts (half its last burst handed back
/// unprocessed), the main thread removes it and adds another (reusing the freed ids), and a
/// stats thread reads the registry all along. Affinity, per-flow order and exactly once
/// hold throughout; the registry's totals never go backwards (removed workers' counters are
/// folded in), list each id at most once, and end equal to what the workers did.
#[test]
fn workers_added_and_removed_under_load_keep_order_and_exactly_once() {
    let flows = 32usize;
    let n: u64 = if cfg!(miri) { 80 } else { 50_000 };
    let (mut d, ws) = distributor::new(Config::default().workers(1).credit(16), tag).unwrap();
    let registry = d.registry();
    let checker = Arc::new(Checker::new(flows));
    let (left_tx, left_rx) = std::sync::mpsc::channel::<usize>();
    let dropped = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let registry = registry.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut last = [0u64; 6];
            let mut reads = 0u64;
            while !stop.load(Ordering::Acquire) {
                let t = *registry.totals().values();
                for (k, (now, before)) in t.iter().zip(&last).enumerate() {
                    assert!(
                        now >= before,
                        "registry total {k} went back: {before} -> {now}"
                    );
                }
                last = t;
                let ids: Vec<usize> = registry.workers().iter().map(|w| w.id).collect();
                let unique: HashSet<usize> = ids.iter().copied().collect();
                assert_eq!(unique.len(), ids.len(), "an id listed twice: {ids:?}");
                reads += 1;
                std::thread::yield_now();
            }
            reads
        })
    };
    let spawn = |mut w: Worker<Pkt>, leave_after: u64| {
        let checker = Arc::clone(&checker);
        let left_tx = left_tx.clone();
        let dropped = Arc::clone(&dropped);
        std::thread::spawn(move || {
            let mut burst = Vec::new();
            let mut bursts = 0u64;
            loop {
                match w.recv_burst(&mut burst, 8) {
                    Err(_) => return,
                    Ok(0) => {
                        std::thread::yield_now();
                        continue;
                    }
                    Ok(_) => {}
                }
                bursts += 1;
                if bursts == leave_after {
                    let keep = burst.split_off(burst.len() / 2);
                    for p in burst.drain(..) {
                        checker.process(w.id(), &p, 10);
                        w.done(p).unwrap();
                    }
                    let id = w.id();
                    w.leave(keep).unwrap();
                    left_tx.send(id).unwrap();
                    return;
                }
                for p in burst.drain(..) {
                    checker.process(w.id(), &p, 10);
                    if p.id % 89 == 1 {
                        dropped.fetch_add(1, Ordering::Relaxed);
                        w.drop_packet(p).unwrap();
                    } else {
                        w.done(p).unwrap();
                    }
                }
            }
        })
    };
    let life = |k: u64| {
        if cfg!(miri) {
            2 + k % 3
        } else {
            30 + (k * 37) % 90
        }
    };
    let mut made = 0u64;
    let mut threads: Vec<_> = ws
        .into_iter()
        .map(|w| {
            made += 1;
            spawn(w, life(made))
        })
        .collect();
    let mut seqs = vec![0u64; flows];
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut input: Vec<Pkt> = (0..n)
        .map(|id| {
            let f = (rng.next_u64() % flows as u64) as usize;
            seqs[f] += 1;
            Pkt {
                flow: f as u64,
                seq: seqs[f] - 1,
                id,
            }
        })
        .collect();
    input.reverse();
    let mut out = Vec::new();
    let mut pending = Vec::new();
    let (mut added, mut removed, mut reused) = (0u64, 0u64, 0u64);
    let mut ids_seen = HashSet::new();
    let deadline = std::time::Instant::now() + WAIT;
    let mut round = 0u64;
    while !input.is_empty() || !pending.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "watchdog: no progress"
        );
        round += 1;
        while pending.len() < 32 {
            match input.pop() {
                Some(p) => pending.push(p),
                None => break,
            }
        }
        // NoWorkers: every worker left at once; the packets stay pending until one is added.
        let _ = d.distribute(&mut pending);
        d.collect(&mut out);
        while let Ok(id) = left_rx.try_recv() {
            loop {
                assert!(
                    std::time::Instant::now() < deadline,
                    "watchdog: leave never seen"
                );
                d.collect(&mut out);
                match d.remove_worker(id) {
                    Ok(()) => break,
                    Err(JoinError::Active(_)) => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(d.rejoin(id).unwrap_err(), JoinError::NoSuchWorker(id));
            removed += 1;
        }
        // Keep one to three workers: add one every few rounds, and whenever none is left.
        if d.active_workers() == 0 || (round % 7 == 0 && d.active_workers() < 3) {
            let w = d.add_worker().unwrap();
            if !ids_seen.insert(w.id()) {
                reused += 1;
            }
            added += 1;
            made += 1;
            threads.push(spawn(w, life(made)));
        }
    }
    // The workers still running, and one that stays, finish what is in flight (every
    // churning worker may have left by now: a flush would answer NoWorkers).
    threads.push(spawn(d.add_worker().unwrap(), u64::MAX));
    d.flush(&mut out, WAIT).unwrap();
    stop.store(true, Ordering::Release);
    let reads = reader.join().unwrap();
    let totals = registry.totals();
    assert_eq!(totals, d.worker_totals());
    let listed = registry.workers();
    assert_eq!(
        listed.len(),
        d.active_workers() + listed.iter().filter(|w| !w.active).count()
    );
    drop(d);
    for t in threads {
        t.join().unwrap();
    }
    let ids: HashSet<u64> = out.iter().map(|p| p.id).collect();
    assert_eq!(ids.len(), out.len(), "a packet came back twice");
    let dropped = dropped.load(Ordering::Relaxed);
    assert_eq!(
        out.len() as u64 + dropped,
        n,
        "returned + dropped must equal input"
    );
    assert_eq!(totals.get("returned"), Some(out.len() as u64));
    assert!(totals.get("received").unwrap() >= n - dropped);
    assert!(
        added >= 2 && removed >= 2 || cfg!(miri),
        "added {added}, removed {removed}"
    );
    assert!(reused >= 1 || cfg!(miri), "no removed id was reused");
    assert!(reads >= 1);
}

/// Adding and removing: errors, ids, counters folded into the totals, and nothing lost
/// from a removed worker's ring.
#[test]
fn add_and_remove_workers_errors_ids_and_counters() {
    let (mut d, mut ws) = distributor::new(Config::default().workers(2).credit(4), tag).unwrap();
    let reg = d.registry();
    let v0 = reg.version();
    assert_eq!(d.remove_worker(2), Err(JoinError::NoSuchWorker(2)));
    assert_eq!(d.remove_worker(0), Err(JoinError::Active(0)));
    assert_eq!(reg.version(), v0, "a failed removal publishes nothing");
    // Worker 0 (the least loaded: the first of two idle ones) receives two packets of
    // flow 5, finishes one, and leaves with the other unprocessed; a third packet of the
    // flow is still in its ring.
    let p = |id| Pkt {
        flow: 5,
        seq: id,
        id,
    };
    d.distribute(&mut vec![p(0), p(1), p(2)]).unwrap();
    let w_of_5 = 0;
    let mut w = ws.remove(0);
    w.set_wait_strategy(flowline::wait::WaitStrategy::Spin);
    #[cfg(feature = "async")]
    w.set_async_budget(3);
    let mut b = Vec::new();
    w.recv_burst(&mut b, 2).unwrap();
    assert_eq!(b.len(), 2);
    w.done(b.remove(0)).unwrap();
    w.leave(b).unwrap();
    d.remove_worker(w_of_5).unwrap();
    assert_eq!(
        d.remove_worker(w_of_5),
        Err(JoinError::NoSuchWorker(w_of_5))
    );
    assert_eq!(reg.workers().len(), 1);
    assert_eq!(
        reg.totals().get("received"),
        Some(2),
        "the removed worker's counters stay"
    );
    assert_eq!(reg.totals().get("returned"), Some(1));
    // The packets it did not process go to the worker left, in order.
    let mut other = ws.pop().unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    let got: Vec<u64> = recv_all(&mut other).iter().map(|p| p.id).collect();
    assert_eq!(got, [1, 2]);
    assert_eq!(
        d.worker_completed(w_of_5),
        None,
        "a removed worker is unknown"
    );
    // A new worker reuses the removed id, with fresh counters.
    let mut fresh = d.add_worker().unwrap();
    assert_eq!(fresh.id(), w_of_5);
    assert_eq!(
        d.worker_completed(w_of_5),
        Some(0),
        "completions count from its adding"
    );
    assert_eq!(
        fresh.wait_strategy(),
        distributor::default_wait_strategy(d.active_workers()),
        "not the removed worker's"
    );
    #[cfg(feature = "async")]
    assert_eq!(
        fresh.async_budget(),
        flowline::wait::DEFAULT_ASYNC_BUDGET,
        "not the removed worker's"
    );
    let info = reg.workers().into_iter().find(|i| i.id == w_of_5).unwrap();
    assert!(info.active);
    assert_eq!(info.stats.get("received"), Some(0));
    // And then new ids.
    let next = d.add_worker().unwrap();
    assert_eq!(next.id(), 2);
    assert_eq!(d.active_workers(), 3);
    assert!(recv_all(&mut fresh).is_empty());
    for q in [p(1), p(2)] {
        other.done(q).unwrap();
    }
    let mut out = Vec::new();
    d.flush(&mut out, WAIT).unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(reg.totals().get("returned"), Some(3));
}

/// The most workers one distributor may have, counting workers that left but were not
/// removed; removing one makes room again.
#[test]
#[cfg_attr(
    miri,
    ignore = "1024 workers' rings: bookkeeping with no unsafe code of its own, run natively"
)]
fn adding_beyond_max_workers_is_an_error_until_one_is_removed() {
    let (mut d, ws) = distributor::new(
        Config::default()
            .workers(distributor::MAX_WORKERS)
            .credit(1),
        tag,
    )
    .unwrap();
    assert_eq!(
        d.add_worker().unwrap_err(),
        ConfigError::TooManyWorkers(distributor::MAX_WORKERS + 1)
    );
    let mut ws = ws;
    ws.pop().unwrap().leave(Vec::new()).unwrap();
    assert!(d.add_worker().is_err(), "a worker that left still counts");
    d.remove_worker(distributor::MAX_WORKERS - 1).unwrap();
    assert_eq!(d.add_worker().unwrap().id(), distributor::MAX_WORKERS - 1);
}

/// `worker_completed` counts what the worker itself handed back (processed, dropped,
/// rescheduled), as the distributor reads it: not packets that were sent to it and that it
/// never received, nor those it handed back unprocessed when it left (the worker that
/// takes them over counts them), nor those lost with its dropped handle.
#[test]
fn worker_completed_counts_what_the_worker_handed_back() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(2).credit(8), |p: &u64| *p / 100).unwrap();
    let mut w1 = ws.pop().unwrap();
    let w0 = ws.pop().unwrap();
    // One flow, sent to worker 0, which leaves having received nothing.
    d.distribute(&mut vec![0, 1, 2]).unwrap();
    assert_eq!(recv_all(&mut w1), Vec::<u64>::new());
    w0.leave(Vec::new()).unwrap();
    let mut out = Vec::new();
    d.distribute(&mut Vec::new()).unwrap();
    let mut b = recv_all(&mut w1);
    assert_eq!(b, [0, 1, 2]);
    w1.done_burst(&mut b).unwrap();
    d.flush(&mut out, WAIT).unwrap();
    assert_eq!(
        (d.worker_completed(0), d.worker_completed(1)),
        (Some(0), Some(3))
    );

    // Worker 0 re-joins: of five packets it processes one, drops one, reschedules one
    // (into the same flow: it follows the flow) and leaves with two unprocessed. (Both
    // workers are idle: a new flow goes to the first, worker 0.)
    let mut w0 = d.rejoin(0).unwrap();
    d.distribute(&mut vec![100, 101, 102, 103, 104]).unwrap();
    let mut b = recv_all(&mut w0);
    assert_eq!(b.len(), 5);
    w0.done(b.remove(0)).unwrap();
    w0.drop_packet(b.remove(0)).unwrap();
    w0.reschedule(b.remove(0)).unwrap();
    w0.leave(b).unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    let mut b = recv_all(&mut w1);
    assert_eq!(b, [103, 104, 102]);
    w1.done_burst(&mut b).unwrap();
    d.flush(&mut out, WAIT).unwrap();
    assert_eq!(
        (d.worker_completed(0), d.worker_completed(1)),
        (Some(3), Some(6))
    );

    // Worker 0 again, whose handle is dropped holding two packets (lost) with one more in
    // its ring (never received: it goes to worker 1).
    let mut w0 = d.rejoin(0).unwrap();
    d.distribute(&mut vec![200, 201, 202]).unwrap();
    assert_eq!(w0.recv_burst(&mut b, 2), Ok(2));
    drop(w0);
    d.distribute(&mut Vec::new()).unwrap();
    let mut c = recv_all(&mut w1);
    assert_eq!(c, [202]);
    w1.done_burst(&mut c).unwrap();
    d.flush(&mut out, WAIT).unwrap();
    assert_eq!(
        (d.worker_completed(0), d.worker_completed(1)),
        (Some(3), Some(7))
    );
    assert_eq!(d.stats().snapshot().get("lost"), Some(2));
}
