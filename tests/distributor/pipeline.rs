//! Pipeline distributors: bad layouts and bad stages are clear errors, a forward back or
//! one that overtakes its flow is caught, a full ordered window holds new input back, and
//! threaded workers forwarding through atomic and parallel stages (one leaving and
//! re-joining) keep every packet once, each atomic stage's flows on one worker at a time
//! and in order.
#![cfg(all(not(loom), feature = "std"))]

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowline::distributor::{self, Config, ConfigError, StageType, Worker, MAX_STAGES};

/// (stage, flow, sequence in its flow).
type Pkt = (usize, u64, u64);

const LONG: Duration = Duration::from_secs(30);

fn route(p: &Pkt) -> (usize, u64) {
    (p.0, p.1)
}

/// A `route` that panics while the returned switch is on (`store(true, Relaxed)`).
fn failing_route() -> (Arc<AtomicBool>, impl FnMut(&Pkt) -> (usize, u64)) {
    let fail = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&fail);
    let route = move |p: &Pkt| {
        // Relaxed: one thread asks.
        assert!(!f.load(Ordering::Relaxed), "route fails");
        (p.0, p.1)
    };
    (fail, route)
}

type OaDist = distributor::Distributor<Pkt, distributor::Pipeline<Pkt, fn(&Pkt) -> (usize, u64)>>;

/// A pipeline of an ordered then an atomic stage, and its workers.
fn ordered_then_atomic(workers: usize, credit: usize) -> (OaDist, Vec<Worker<Pkt>>) {
    let c = Config::default().workers(workers).credit(credit);
    let stages = [StageType::Ordered, StageType::Atomic];
    distributor::new_pipeline(c, &stages, route as fn(&Pkt) -> (usize, u64)).unwrap()
}

/// Routes and lets every worker complete what it gets until `n` packets were seen;
/// returns them in the order the workers (in turn) got them.
fn complete_at_next_stage(d: &mut OaDist, ws: &mut [Worker<Pkt>], n: usize) -> Vec<Pkt> {
    let (mut seen, mut b) = (Vec::new(), Vec::new());
    while seen.len() < n {
        d.distribute(&mut Vec::new()).unwrap();
        for w in ws.iter_mut() {
            w.recv_burst(&mut b, 64).unwrap();
            seen.extend_from_slice(&b);
            w.done_burst(&mut b).unwrap();
        }
    }
    seen
}

#[test]
fn bad_stage_lists_are_refused() {
    let c = Config::default().workers(1).credit(8);
    let e = distributor::new_pipeline(c, &[], route).unwrap_err();
    assert_eq!(e, ConfigError::BadStages(0));
    assert!(e.to_string().contains("0 pipeline stages"));
    let many = vec![StageType::Parallel; MAX_STAGES + 1];
    let e = distributor::new_pipeline(c, &many, route).unwrap_err();
    assert_eq!(e, ConfigError::BadStages(MAX_STAGES + 1));
    assert!(distributor::new_pipeline(c, &many[1..], route).is_ok());
}

/// A packet whose route names no stage is a panic that names it; the packet stays with
/// the caller, with those behind it, and the packets placed before it count as entries.
#[test]
fn a_stage_past_the_last_is_a_clear_panic_and_loses_nothing() {
    let c = Config::default().workers(1).credit(8);
    let (mut d, _ws) = distributor::new_pipeline(c, &[StageType::Atomic], route).unwrap();
    let mut input = vec![(0, 1, 0), (3, 1, 1), (0, 2, 0)];
    let e = catch_unwind(AssertUnwindSafe(|| d.distribute(&mut input))).unwrap_err();
    let msg = e.downcast_ref::<String>().unwrap();
    assert!(
        msg.contains("gave stage 3") && msg.contains("1 stages"),
        "{msg}"
    );
    assert_eq!(input, [(3, 1, 1), (0, 2, 0)]);
    assert_eq!(d.in_flight(), 1);
    // The packet placed before the panic counts as an entry of its stage, and as accepted
    // (once: the call's own count never ran).
    assert_eq!(d.stage_entries(), [1]);
    assert_eq!(d.stats().snapshot().get("accepted"), Some(1));
    input.remove(0);
    assert_eq!(d.distribute(&mut input), Ok(1));
    assert_eq!(d.stats().snapshot().get("accepted"), Some(2));
    assert_eq!(d.stage_entries(), [2]);
    // A run of one stage after another: each counted at its own stage.
    let (mut d, _ws) =
        distributor::new_pipeline(c, &[StageType::Atomic, StageType::Parallel], route).unwrap();
    let mut input = vec![
        (0, 1, 0),
        (0, 2, 0),
        (1, 3, 0),
        (0, 4, 0),
        (1, 5, 0),
        (1, 6, 0),
    ];
    assert_eq!(d.distribute(&mut input), Ok(6));
    assert_eq!(d.stage_entries(), [3, 3]);
}

/// A pipeline of one atomic stage takes the atomic distributor's paths: flows keyed by
/// the tag's low 57 bits (tags that differ only above them share a flow), the order check
/// of every packet handed back (debug builds), a `route` that panics there reaching the
/// caller with the burst kept for `collect`, and entries counted whether or not the
/// admission limit cuts the input short.
#[test]
fn one_atomic_stage_routes_and_checks_as_an_atomic_distributor() {
    let (fail, route) = failing_route();
    let c = Config::default().workers(2).credit(8);
    let (mut d, mut ws) = distributor::new_pipeline(c, &[StageType::Atomic], route).unwrap();
    // Two tags equal in their low 57 bits are one flow: both packets go to one worker.
    let high = 1u64 << 60;
    d.distribute(&mut vec![(0, 5, 0), (0, 5 | high, 1), (0, 6, 0)])
        .unwrap();
    let mut b = Vec::new();
    let got: Vec<usize> = ws
        .iter_mut()
        .map(|w| {
            w.recv_burst(&mut b, 8).unwrap();
            let n = b.iter().filter(|p| p.1 & !high == 5).count();
            w.done_burst(&mut b).unwrap();
            n
        })
        .collect();
    assert!(got == [2, 0] || got == [0, 2], "{got:?}");
    let mut out = Vec::new();
    d.distribute(&mut Vec::new()).unwrap();
    d.collect(&mut out);
    assert_eq!(out.len(), 3);
    // The admission limit cuts the input short (the general pass), then allows it all.
    d.set_admission_limit(2);
    let mut input = vec![(0, 1, 0), (0, 2, 0), (0, 3, 0)];
    assert_eq!(d.distribute(&mut input), Ok(2));
    assert_eq!(input, [(0, 3, 0)]);
    d.set_admission_limit(16);
    assert_eq!(d.distribute(&mut input), Ok(1));
    assert_eq!(d.stage_entries(), [6]);
    // A `route` that panics while hand-backs are read: the burst comes out of `collect`.
    let mut held = 0;
    for w in ws.iter_mut() {
        w.recv_burst(&mut b, 8).unwrap();
        held += b.len();
        w.done_burst(&mut b).unwrap();
    }
    assert_eq!(held, 3);
    fail.store(true, Ordering::Relaxed);
    assert!(catch_unwind(AssertUnwindSafe(|| d.distribute(&mut Vec::new()))).is_err());
    fail.store(false, Ordering::Relaxed);
    out.clear();
    while out.len() < 3 {
        d.distribute(&mut Vec::new()).unwrap();
        d.collect(&mut out);
    }
    assert_eq!(d.in_flight(), 0);
    // A packet handed back with another flow than it was sent with is caught (every
    // packet in debug builds, one per burst otherwise: a burst of one here).
    d.distribute(&mut vec![(0, 9, 0)]).unwrap();
    let w = ws.iter_mut().find_map(|w| {
        w.recv_burst(&mut b, 8).unwrap();
        (!b.is_empty()).then_some(w)
    });
    b[0].1 = 10;
    w.unwrap().done_burst(&mut b).unwrap();
    let e = catch_unwind(AssertUnwindSafe(|| d.distribute(&mut Vec::new()))).unwrap_err();
    let msg = e.downcast_ref::<String>().unwrap();
    assert!(
        msg.contains("expected a packet of tag 0x9, got tag 0xa"),
        "{msg}"
    );
}

/// A forward to an earlier stage is caught at the distributor; the packet is not lost (it
/// comes out of `collect`, as handed back).
#[test]
fn a_forward_back_is_a_clear_panic() {
    let c = Config::default().workers(1).credit(8);
    let stages = [StageType::Atomic, StageType::Atomic, StageType::Parallel];
    let (mut d, mut ws) = distributor::new_pipeline(c, &stages, route).unwrap();
    d.distribute(&mut vec![(0, 1, 0)]).unwrap();
    let mut b = Vec::new();
    ws[0].recv_burst(&mut b, 8).unwrap();
    ws[0].forward((1, 1, 0)).unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    ws[0].recv_burst(&mut b, 8).unwrap();
    assert_eq!(b[1], (1, 1, 0));
    ws[0].forward((0, 1, 0)).unwrap();
    let e = catch_unwind(AssertUnwindSafe(|| d.distribute(&mut Vec::new()))).unwrap_err();
    let msg = e.downcast_ref::<String>().unwrap();
    assert!(
        msg.contains("at stage 1 was forwarded back to stage 0"),
        "{msg}"
    );
    let mut out = Vec::new();
    d.collect(&mut out);
    assert_eq!((out, d.in_flight()), (vec![(0, 1, 0)], 0));
}

/// At an atomic stage, a forward by ticket ahead of an older packet of its own flow is
/// caught (it would let the next stage see the flow out of order); at a parallel stage
/// it is allowed.
#[test]
fn a_forward_that_overtakes_its_flow_is_caught_at_atomic_stages() {
    for (kind, caught) in [(StageType::Atomic, true), (StageType::Parallel, false)] {
        let c = Config::default().workers(1).credit(8);
        let (mut d, mut ws) =
            distributor::new_pipeline(c, &[kind, StageType::Atomic], route).unwrap();
        d.distribute(&mut vec![(0, 1, 0), (0, 1, 1)]).unwrap();
        let first = ws[0].next_ticket();
        let mut b = Vec::new();
        ws[0].recv_burst(&mut b, 8).unwrap();
        ws[0].forward_at(first.nth(1), (1, 1, 1)).unwrap();
        ws[0].publish_handed_back();
        let r = catch_unwind(AssertUnwindSafe(|| d.distribute(&mut Vec::new())));
        assert_eq!(r.is_err(), caught, "{kind:?}");
        if let Err(e) = r {
            let msg = e.downcast_ref::<String>().unwrap();
            assert!(msg.contains("before the one at position 0"), "{msg}");
        }
    }
}

/// One flow spread over two workers at an ordered stage: the worker with the newer packets
/// forwards first, and nothing reaches the next (atomic) stage until the older ones go
/// on; then the whole flow arrives there in the order it came in.
#[test]
fn an_ordered_stage_lets_packets_go_on_in_the_order_they_came() {
    let (mut d, mut ws) = ordered_then_atomic(2, 8);
    let mut input: Vec<Pkt> = (0..16).map(|i| (0, 7, i)).collect();
    assert_eq!(d.distribute(&mut input), Ok(16));
    let mut got: Vec<Vec<Pkt>> = vec![Vec::new(), Vec::new()];
    for (w, g) in ws.iter_mut().zip(&mut got) {
        w.recv_burst(g, 16).unwrap();
    }
    assert_eq!(
        (got[0].len(), got[1].len()),
        (8, 8),
        "spread over both workers"
    );
    let older = usize::from(got[1][0].2 == 0);
    let on = |w: &mut Worker<Pkt>, pkts: &mut Vec<Pkt>| {
        for p in pkts.iter_mut() {
            p.0 = 1;
        }
        w.done_burst(pkts).unwrap();
    };
    on(&mut ws[1 - older], &mut got[1 - older]);
    d.distribute(&mut Vec::new()).unwrap();
    let mut b = Vec::new();
    for w in ws.iter_mut() {
        assert_eq!(
            w.recv_burst(&mut b, 16),
            Ok(0),
            "the newer packets went on first"
        );
    }
    on(&mut ws[older], &mut got[older]);
    // Stage 1 is atomic: the flow is on one worker at a time, within its credit.
    let seen = complete_at_next_stage(&mut d, &mut ws, 16);
    assert_eq!(seen, (0..16).map(|i| (1, 7, i)).collect::<Vec<_>>());
    assert_eq!(d.stage_entries(), [16, 16]);
}

/// Who holds each (stage, flow) of the atomic stages, and the next sequence number each
/// may process there.
struct Seen {
    stages: Vec<StageType>,
    held: HashMap<(usize, u64), (usize, usize)>,
    next: HashMap<(usize, u64), u64>,
}

type Rejoin = std::sync::mpsc::Receiver<Worker<Pkt>>;

/// A worker thread: takes bursts, checks the atomic stages' promises, forwards each packet
/// to the next stage (stage 0 moves it to flow `flow + 1000`), completes it at the last.
/// Worker 0 leaves once, after its first burst's first two packets, and re-joins through
/// the distributor.
fn work(
    mut w: Worker<Pkt>,
    seen: &Mutex<Seen>,
    rejoin: &Rejoin,
    leave: &std::sync::mpsc::Sender<()>,
) {
    let id = w.id();
    let mut b = Vec::new();
    let mut left = false;
    while w.recv_burst_wait(&mut b, 16, LONG).is_ok() {
        {
            let mut s = seen.lock().unwrap();
            let atomic = s.stages.clone();
            for p in b.iter().filter(|p| atomic[p.0] == StageType::Atomic) {
                let h = s.held.entry((p.0, p.1)).or_insert((id, 0));
                assert!(
                    h.0 == id || h.1 == 0,
                    "{:?} on workers {} and {id}",
                    (p.0, p.1),
                    h.0
                );
                *h = (id, h.1 + 1);
            }
        }
        if id == 0 && !left {
            left = true;
            let keep = b.split_off(b.len().min(2));
            hand_on(&mut w, &mut b, seen);
            release(seen, &keep, false);
            w.leave(keep).unwrap();
            leave.send(()).unwrap();
            match rejoin.recv() {
                Ok(again) => w = again,
                Err(_) => return,
            }
            continue;
        }
        hand_on(&mut w, &mut b, seen);
    }
}

/// `pkts` leave this worker's hands (`processed`: in this order, which the atomic stages'
/// order check follows).
fn release(seen: &Mutex<Seen>, pkts: &[Pkt], processed: bool) {
    let mut s = seen.lock().unwrap();
    let atomic = s.stages.clone();
    for p in pkts.iter().filter(|p| atomic[p.0] == StageType::Atomic) {
        s.held.get_mut(&(p.0, p.1)).unwrap().1 -= 1;
        if processed {
            let next = s.next.entry((p.0, p.1)).or_insert(0);
            assert!(
                p.2 >= *next,
                "{:?}: sequence {} after {}",
                (p.0, p.1),
                p.2,
                *next
            );
            *next = p.2 + 1;
        }
    }
}

fn hand_on(w: &mut Worker<Pkt>, b: &mut Vec<Pkt>, seen: &Mutex<Seen>) {
    for p in b.drain(..) {
        release(seen, &[p], true);
        match p.0 {
            0 => w.forward((1, p.1 + 1000, p.2)).unwrap(),
            1 => w.forward((2, p.1, p.2)).unwrap(),
            _ => w.done(p).unwrap(),
        }
    }
}

/// Three workers forward 20,000 packets of 64 flows through two atomic stages (the second
/// sees each flow in the order the first processed it) and a parallel one; worker 0
/// leaves mid-burst and re-joins. Every packet comes out once.
#[test]
fn threaded_workers_forward_through_atomic_atomic_parallel() {
    forward_through(&[StageType::Atomic, StageType::Atomic, StageType::Parallel]);
}

/// As above through an ordered stage (flows spread over every worker), then an atomic one,
/// which sees each flow in input order (the ordered stage restores it as packets leave),
/// then a parallel one.
#[test]
fn threaded_workers_forward_through_ordered_atomic_parallel() {
    forward_through(&[StageType::Ordered, StageType::Atomic, StageType::Parallel]);
}

fn forward_through(stages: &[StageType]) {
    // Fewer under Miri (each packet crosses three stages of interpreted rings).
    const N: u64 = if cfg!(miri) { 120 } else { 20_000 };
    let c = Config::default().workers(3).credit(32);
    let (mut d, ws) = distributor::new_pipeline(c, stages, route).unwrap();
    let seen = Arc::new(Mutex::new(Seen {
        stages: stages.to_vec(),
        held: HashMap::new(),
        next: HashMap::new(),
    }));
    let (rejoin_tx, rejoin_rx) = std::sync::mpsc::channel();
    let (leave_tx, leave_rx) = std::sync::mpsc::channel();
    let mut rejoin_rx = Some(rejoin_rx);
    let threads: Vec<_> = ws
        .into_iter()
        .map(|w| {
            let (seen, leave) = (Arc::clone(&seen), leave_tx.clone());
            let rx = match w.id() {
                0 => rejoin_rx.take().unwrap(),
                _ => std::sync::mpsc::channel().1,
            };
            std::thread::spawn(move || work(w, &seen, &rx, &leave))
        })
        .collect();
    let mut input: Vec<Pkt> = (0..N).rev().map(|i| (0, i % 64, i / 64)).collect();
    let (mut out, mut burst, mut rejoined) = (Vec::new(), Vec::new(), false);
    while out.len() < N as usize {
        while burst.len() < 32 {
            let Some(p) = input.pop() else { break };
            burst.push(p);
        }
        if burst.is_empty() {
            d.collect_wait(&mut out, LONG).unwrap();
        } else {
            d.distribute_wait(&mut burst, LONG).unwrap();
            d.collect(&mut out);
        }
        if leave_rx.try_recv().is_ok() {
            rejoin_tx.send(d.rejoin(0).unwrap()).unwrap();
            rejoined = true;
        }
    }
    assert!(rejoined, "worker 0 left and came back");
    drop((d, rejoin_tx));
    for t in threads {
        t.join().unwrap();
    }
    let mut ids: Vec<u64> = out.iter().map(|p| p.1 % 1000 + 64 * p.2).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..N).collect::<Vec<_>>());
    assert!(out.iter().all(|p| p.0 == 2 && p.1 >= 1000));
}

/// A worker whose thread panics while it holds packets of an ordered stage: its packets
/// are counted as lost and give their places in the stage's window up, so the packets
/// behind them still go on; every other packet comes out, and a flush ends.
#[test]
fn a_panicking_worker_s_packets_are_lost_and_the_ordered_stage_goes_on() {
    const N: u64 = if cfg!(miri) { 400 } else { 4_000 };
    const PANIC_AT: u64 = N / 20;
    let c = Config::default().workers(2).credit(16);
    let stages = [StageType::Ordered, StageType::Atomic];
    let (mut d, ws) = distributor::new_pipeline(c, &stages, route).unwrap();
    let threads: Vec<_> = ws
        .into_iter()
        .map(|mut w| {
            std::thread::spawn(move || {
                let mut b = Vec::new();
                let mut seen = 0u64;
                while w.recv_burst_wait(&mut b, 16, LONG).is_ok() {
                    seen += b.len() as u64;
                    assert!(
                        w.id() != 0 || seen < PANIC_AT,
                        "worker 0 panics, holding its burst"
                    );
                    for p in b.iter_mut() {
                        p.0 = (p.0 + 1).min(1);
                    }
                    w.done_burst(&mut b).unwrap();
                }
            })
        })
        .collect();
    let mut input: Vec<Pkt> = (0..N).rev().map(|i| (0, i % 16, i)).collect();
    let (mut out, mut burst) = (Vec::new(), Vec::new());
    while !input.is_empty() || !burst.is_empty() {
        while burst.len() < 32 {
            let Some(p) = input.pop() else { break };
            burst.push(p);
        }
        d.distribute_wait(&mut burst, LONG).unwrap();
        d.collect(&mut out);
    }
    let mut rest = Vec::new();
    d.flush(&mut rest, LONG).unwrap();
    out.append(&mut rest);
    let lost_now = d.stats().snapshot().get("lost").unwrap_or(0);
    assert!(lost_now > 0, "worker 0 held packets when it panicked");
    assert_eq!(out.len() as u64 + lost_now, N);
    let mut ids: Vec<u64> = out.iter().map(|p| p.2).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), out.len(), "nothing twice");
    drop(d);
    let panicked = threads.into_iter().filter_map(|t| t.join().err()).count();
    assert_eq!(panicked, 1);
}

/// Links: a worker gets only packets of the stages it serves; a stage no worker serves
/// holds its packets (nothing lost, the other stages go on) until a worker is linked to it.
#[test]
fn workers_get_only_the_stages_they_serve() {
    let c = Config::default().workers(2).credit(8);
    let stages = [StageType::Atomic, StageType::Ordered];
    let (mut d, mut ws) = distributor::new_pipeline(c, &stages, route).unwrap();
    d.link(0, &[0]).unwrap();
    d.link(1, &[]).unwrap();
    assert_eq!(
        (d.links(0), d.links(1), d.links(2)),
        (Some(vec![0]), Some(vec![]), None)
    );
    d.distribute(&mut (0..6).map(|i| (0, i, 0)).collect())
        .unwrap();
    let mut b = Vec::new();
    assert_eq!(
        ws[1].recv_burst(&mut b, 8),
        Ok(0),
        "worker 1 serves nothing"
    );
    assert_eq!(ws[0].recv_burst(&mut b, 8), Ok(6));
    for p in b.iter_mut() {
        p.0 = 1;
    }
    ws[0].done_burst(&mut b).unwrap();
    // Stage 1 has no worker: its packets wait in the distributor.
    d.distribute(&mut Vec::new()).unwrap();
    assert_eq!(ws[0].recv_burst(&mut b, 8), Ok(0));
    assert_eq!(ws[1].recv_burst(&mut b, 8), Ok(0));
    assert_eq!(d.in_flight(), 6);
    d.link(1, &[1]).unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    assert_eq!(
        ws[1].recv_burst(&mut b, 8),
        Ok(6),
        "stage 1 reached its new worker"
    );
    ws[1].done_burst(&mut b).unwrap();
    let mut out = Vec::new();
    d.collect(&mut out);
    assert_eq!(out, (0..6).map(|i| (1, i, 0)).collect::<Vec<_>>());
    assert_eq!(
        d.link(7, &[0]),
        Err(distributor::PipelineError::NoSuchWorker(7))
    );
    assert_eq!(
        d.link(0, &[2]),
        Err(distributor::PipelineError::NoSuchStage(2))
    );
}

/// Priorities: forwards to a higher-priority stage are placed first (they take the
/// credit first); with equal priorities, in the order they were forwarded.
#[test]
fn forwards_to_a_higher_priority_stage_are_placed_first() {
    for (prio_1, prio_2, expect) in [(0u8, 0u8, [1, 2]), (0, 5, [2, 1]), (9, 5, [1, 2])] {
        let c = Config::default().workers(1).credit(4);
        let stages = [StageType::Atomic, StageType::Atomic, StageType::Atomic];
        let (mut d, mut ws) = distributor::new_pipeline(c, &stages, route).unwrap();
        d.set_priority(1, prio_1).unwrap();
        d.set_priority(2, prio_2).unwrap();
        assert_eq!((d.priority(1), d.priority(3)), (Some(prio_1), None));
        d.distribute(&mut vec![(0, 1, 0), (0, 2, 0)]).unwrap();
        let mut b = Vec::new();
        ws[0].recv_burst(&mut b, 8).unwrap();
        // Both go on at once: flow 1 to stage 1, flow 2 to stage 2.
        b[0].0 = 1;
        b[1].0 = 2;
        ws[0].done_burst(&mut b).unwrap();
        d.distribute(&mut Vec::new()).unwrap();
        ws[0].recv_burst(&mut b, 8).unwrap();
        let stages_in_order: Vec<usize> = b.iter().map(|p| p.0).collect();
        assert_eq!(stages_in_order, expect, "priorities {prio_1} and {prio_2}");
    }
}

/// The user's `route` panicking while the distributor reads hand-backs (every route of a
/// burst is asked before any packet moves): the panic reaches the caller, the packets of
/// that burst leave through `collect` as handed back, and nothing is lost or counted twice.
#[test]
fn a_route_that_panics_on_a_hand_back_loses_nothing() {
    let (fail, route) = failing_route();
    let c = Config::default().workers(1).credit(8);
    let stages = [StageType::Atomic, StageType::Atomic];
    let (mut d, mut ws) = distributor::new_pipeline(c, &stages, route).unwrap();
    d.distribute(&mut vec![(0, 1, 0), (0, 2, 0)]).unwrap();
    let mut b = Vec::new();
    ws[0].recv_burst(&mut b, 8).unwrap();
    for p in b.iter_mut() {
        p.0 = 1;
    }
    ws[0].done_burst(&mut b).unwrap();
    fail.store(true, Ordering::Relaxed);
    assert!(catch_unwind(AssertUnwindSafe(|| d.distribute(&mut Vec::new()))).is_err());
    fail.store(false, Ordering::Relaxed);
    let mut out = Vec::new();
    d.collect(&mut out);
    out.sort_unstable();
    assert_eq!(out, [(1, 1, 0), (1, 2, 0)]);
    assert_eq!(d.in_flight(), 0);
    // The pipeline goes on.
    d.distribute(&mut vec![(0, 3, 0)]).unwrap();
    assert_eq!(ws[0].recv_burst(&mut b, 8), Ok(1));
}

/// Ordered stages whose sequence numbers pass the point where a stamp's 57 bits wrap
/// (2^57 - 1, and twice that): every round's packets, handed back newest worker first at
/// both stages, still go on and come out in the order they came.
#[test]
fn ordered_stages_keep_order_across_the_stamp_wrap() {
    const WRAP: u64 = (1 << 57) - 1;
    for start in [WRAP - 20, 2 * WRAP - 7] {
        let c = Config::default().workers(2).credit(8);
        let stages = [StageType::Ordered, StageType::Ordered];
        let (mut d, mut ws) = distributor::new_pipeline(c, &stages, route).unwrap();
        d.start_sequences_at(start);
        let mut out = Vec::new();
        for round in 0..4u64 {
            let mut input: Vec<Pkt> = (0..16).map(|i| (0, i, round * 16 + i)).collect();
            assert_eq!(d.distribute(&mut input), Ok(16));
            for stage in 0..2 {
                let mut got: Vec<Vec<Pkt>> = vec![Vec::new(), Vec::new()];
                for (w, g) in ws.iter_mut().zip(&mut got) {
                    w.recv_burst(g, 16).unwrap();
                }
                assert_eq!(got[0].len() + got[1].len(), 16, "stage {stage}");
                // The worker holding the newer packets hands back first.
                let older = usize::from(got[1].first().map(|p| p.2) < got[0].first().map(|p| p.2));
                for w in [1 - older, older] {
                    for p in got[w].iter_mut() {
                        p.0 = 1;
                    }
                    ws[w].done_burst(&mut got[w]).unwrap();
                }
                d.distribute(&mut Vec::new()).unwrap();
            }
            d.collect(&mut out);
        }
        let seqs: Vec<u64> = out.iter().map(|p| p.2).collect();
        assert_eq!(seqs, (0..64).collect::<Vec<_>>(), "start {start}");
        assert_eq!(d.stage_entries(), [64, 64]);
    }
}

/// A flow whose route panics (set by a worker on a packet it hands back).
const PANICS: u64 = 666;

fn route_or_panic(p: &Pkt) -> (usize, u64) {
    assert!(p.1 != PANICS, "route fails");
    (p.0, p.1)
}

/// If `route` panics while a burst handed back from an ordered stage is read, the burst
/// leaves through `collect` as handed back and gives its places in the stage's window
/// up: the packets behind it are not held for them.
#[test]
fn a_route_panic_at_an_ordered_stage_holds_no_later_packet() {
    for stages in [
        &[StageType::Ordered][..],
        &[StageType::Ordered, StageType::Atomic],
    ] {
        let c = Config::default().workers(1).credit(4);
        let (mut d, mut ws) = distributor::new_pipeline(c, stages, route_or_panic).unwrap();
        let (mut b, mut out) = (Vec::new(), Vec::new());
        d.distribute(&mut vec![(0, 1, 0), (0, 1, 1)]).unwrap();
        ws[0].recv_burst(&mut b, 1).unwrap();
        b[0].1 = PANICS;
        ws[0].done_burst(&mut b).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| d.distribute(&mut Vec::new())));
        assert!(r.is_err(), "{stages:?}");
        d.collect(&mut out);
        assert_eq!(out, [(0, PANICS, 0)], "{stages:?}");
        // The second, then a third: each goes on (forwarded to the atomic stage first,
        // where there is one) and comes out.
        d.distribute(&mut vec![(0, 1, 2)]).unwrap();
        for _ in 0..4 {
            ws[0].recv_burst(&mut b, 8).unwrap();
            for p in &mut b {
                p.0 = stages.len() - 1;
            }
            ws[0].done_burst(&mut b).unwrap();
            d.distribute(&mut Vec::new()).unwrap();
            d.collect(&mut out);
        }
        assert_eq!(
            out,
            [
                (0, PANICS, 0),
                (stages.len() - 1, 1, 1),
                (stages.len() - 1, 1, 2)
            ],
            "{stages:?}"
        );
        assert_eq!(d.in_flight(), 0);
    }
}

/// The same when `route` panics in the middle of a burst forwarded in order out of an
/// ordered stage (its first packets' routes already asked): the whole burst leaves as
/// handed back, and the stage's later packets go on.
#[test]
fn a_route_panic_in_the_middle_of_an_ordered_run_holds_no_later_packet() {
    let c = Config::default().workers(1).credit(8);
    let stages = [StageType::Ordered, StageType::Atomic];
    let (mut d, mut ws) = distributor::new_pipeline(c, &stages, route_or_panic).unwrap();
    let (mut b, mut out) = (Vec::new(), Vec::new());
    d.distribute(&mut (0..6).map(|i| (0, 1, i)).collect())
        .unwrap();
    ws[0].recv_burst(&mut b, 4).unwrap();
    for p in b.iter_mut() {
        p.0 = 1;
    }
    b[2].1 = PANICS;
    let handed_back = b.clone();
    ws[0].done_burst(&mut b).unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| d.distribute(&mut Vec::new())));
    assert!(r.is_err());
    d.collect(&mut out);
    assert_eq!(out, handed_back);
    for _ in 0..4 {
        ws[0].recv_burst(&mut b, 8).unwrap();
        for p in &mut b {
            p.0 = 1;
        }
        ws[0].done_burst(&mut b).unwrap();
        d.distribute(&mut Vec::new()).unwrap();
        d.collect(&mut out);
    }
    assert_eq!(out[4..], [(1, 1, 4), (1, 1, 5)]);
    assert_eq!(d.in_flight(), 0);
}

/// The same for one packet handed back out of order (by ticket), read from the control
/// ring: it gives its place up, so the older one and those after it go on.
#[test]
fn a_route_panic_on_a_packet_handed_back_by_ticket_holds_no_later_packet() {
    let c = Config::default().workers(1).credit(4);
    let (mut d, mut ws) =
        distributor::new_pipeline(c, &[StageType::Ordered], route_or_panic).unwrap();
    let (mut b, mut out) = (Vec::new(), Vec::new());
    d.distribute(&mut vec![(0, 1, 0), (0, 1, 1)]).unwrap();
    let t = ws[0].next_ticket();
    ws[0].recv_burst(&mut b, 8).unwrap();
    ws[0].done_at(t.nth(1), (0, PANICS, 1)).unwrap();
    ws[0].publish_handed_back();
    let r = catch_unwind(AssertUnwindSafe(|| d.distribute(&mut Vec::new())));
    assert!(r.is_err());
    d.collect(&mut out);
    assert_eq!(out, [(0, PANICS, 1)]);
    ws[0].done(b[0]).unwrap();
    d.distribute(&mut vec![(0, 1, 2)]).unwrap();
    ws[0].recv_burst(&mut b, 8).unwrap();
    ws[0].done(b[2]).unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    d.collect(&mut out);
    assert_eq!(out, [(0, PANICS, 1), (0, 1, 0), (0, 1, 2)]);
    assert_eq!(d.in_flight(), 0);
}

/// An ordered stage's window (four times the workers' credit: 32 here) full of packets
/// waiting for the oldest, which one worker keeps while the other hands back everything
/// it gets, under an admission limit above the window: new input waits in the caller's
/// vector, nothing is collected, and once the oldest comes back everything leaves in the
/// order it entered.
#[test]
fn a_full_ordered_window_holds_new_input_back_until_its_oldest_leaves() {
    let c = Config::default().workers(2).credit(4);
    let (mut d, mut ws) = distributor::new_pipeline(c, &[StageType::Ordered], route).unwrap();
    d.set_admission_limit(1000);
    let all: Vec<Pkt> = (0..80).map(|i| (0, i % 3, i)).collect();
    let mut input = all.clone();
    let (mut held, mut b, mut out) = (Vec::new(), Vec::new(), Vec::new());
    d.distribute(&mut input).unwrap();
    ws[0].recv_burst(&mut held, 64).unwrap();
    ws[1].recv_burst(&mut b, 64).unwrap();
    // `h` keeps the oldest packet, and whatever else it gets.
    let h = if held.first().is_some_and(|p| p.2 == 0) {
        0
    } else {
        std::mem::swap(&mut held, &mut b);
        1
    };
    assert_eq!(held[0].2, 0);
    loop {
        ws[1 - h].done_burst(&mut b).unwrap();
        let placed = d.distribute(&mut input).unwrap();
        ws[h].recv_burst(&mut held, 64).unwrap();
        let got = ws[1 - h].recv_burst(&mut b, 64).unwrap();
        if placed == 0 && got == 0 {
            break;
        }
    }
    assert_eq!(d.stage_entries(), [32], "the window's room, and no more");
    assert_eq!(input, all[32..], "the rest waits, in order");
    assert_eq!(d.collect(&mut out), 0, "all wait for the oldest");
    ws[h].done_burst(&mut held).unwrap();
    while out.len() < all.len() {
        d.distribute(&mut input).unwrap();
        for w in ws.iter_mut() {
            w.recv_burst(&mut b, 64).unwrap();
            w.done_burst(&mut b).unwrap();
        }
        d.collect(&mut out);
    }
    assert_eq!(out, all, "out in the order they entered");
    assert_eq!(d.in_flight(), 0);
}

/// A burst handed back from an ordered stage that forwards some packets and completes one
/// in the middle: each leaves the stage in the order it entered, the completion through
/// `collect` and the forwards on to the next stage.
#[test]
fn an_ordered_burst_that_completes_one_packet_in_the_middle_keeps_its_order() {
    let (mut d, mut ws) = ordered_then_atomic(1, 8);
    let (mut b, mut out) = (Vec::new(), Vec::new());
    d.distribute(&mut (0..6).map(|i| (0, 7, i)).collect())
        .unwrap();
    ws[0].recv_burst(&mut b, 8).unwrap();
    for p in b.iter_mut().filter(|p| p.2 != 3) {
        p.0 = 1;
    }
    ws[0].done_burst(&mut b).unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    assert_eq!(d.collect(&mut out), 1);
    assert_eq!(out, [(0, 7, 3)]);
    ws[0].recv_burst(&mut b, 8).unwrap();
    assert_eq!(b, [(1, 7, 0), (1, 7, 1), (1, 7, 2), (1, 7, 4), (1, 7, 5)]);
    ws[0].done_burst(&mut b).unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    d.collect(&mut out);
    assert_eq!(out.len(), 6);
    assert_eq!(d.stage_entries(), [6, 5]);
    assert_eq!(d.in_flight(), 0);
}

/// A burst forwarded out of an ordered stage ahead of an older packet (by the worker that
/// got the newer one) waits in the window, and goes on behind the older one.
#[test]
fn an_ordered_burst_forwarded_ahead_of_an_older_packet_waits_for_it() {
    let (mut d, mut ws) = ordered_then_atomic(2, 1);
    d.distribute(&mut vec![(0, 7, 0), (0, 7, 1)]).unwrap();
    let mut got = [Vec::new(), Vec::new()];
    for (w, g) in ws.iter_mut().zip(&mut got) {
        assert_eq!(w.recv_burst(g, 8), Ok(1));
        g[0].0 = 1;
    }
    let newer = usize::from(got[1][0].2 == 1);
    ws[newer].done_burst(&mut got[newer]).unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    let mut b = Vec::new();
    for w in ws.iter_mut() {
        assert_eq!(w.recv_burst(&mut b, 8), Ok(0), "the newer packet waits");
    }
    ws[1 - newer].done_burst(&mut got[1 - newer]).unwrap();
    let seen = complete_at_next_stage(&mut d, &mut ws, 2);
    assert_eq!(seen, [(1, 7, 0), (1, 7, 1)]);
    let mut out = Vec::new();
    d.distribute(&mut Vec::new()).unwrap();
    assert_eq!(d.collect(&mut out), 2);
    assert_eq!(d.in_flight(), 0);
}
