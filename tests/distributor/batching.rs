//! Batching per lane (`set_batching`): staged packets go out within the hold, batches
//! stay within the credit, and staged packets reach a worker or another in order.
#![cfg(all(not(loom), feature = "std"))]

use flowline::distributor::{self, Config, Worker};

use super::guarantees::{recv_all, tag, Pkt, WAIT};

// ---- batching per lane (`set_batching`) ----------------------------------------------------

fn u64_tag(p: &u64) -> u64 {
    *p
}

/// Under load (calls bringing a batch of input or more), a staged packet goes out with its
/// lane's batch, or at the end of the `hold`-th call after the one that staged it; a call
/// with less input publishes everything.
#[test]
fn a_staged_packet_goes_out_within_the_hold() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(2).credit(16), u64_tag).unwrap();
    d.set_batching(8, 3);
    // Flow 1000 fills one worker's credit (published: a batch), and that worker holds it.
    d.distribute(&mut vec![1000; 16]).unwrap();
    let full = ws
        .iter_mut()
        .position(|w| w.recv_burst(&mut Vec::new(), 64) == Ok(16))
        .expect("one worker got flow 1000");
    let other = 1 - full;
    // Each call brings 8 packets: 7 of flow 1000 (no credit: they stay with the caller)
    // and one new flow, which goes to the other worker and is staged there.
    let mut input = vec![1000; 7];
    let mut b = Vec::new();
    for call in 1..=4u64 {
        input.push(call);
        assert_eq!(d.distribute(&mut input), Ok(1));
        assert_eq!(input, [1000; 7], "flow 1000 waits for credit");
        let got = ws[other].recv_burst(&mut b, 64).unwrap();
        // Staged at the end of call 1: published at the end of call 1 + 3.
        assert_eq!(got, if call < 4 { 0 } else { 4 }, "after call {call}");
    }
    assert_eq!(b, [1, 2, 3, 4]);
    // Light input publishes at once.
    assert_eq!(d.distribute(&mut vec![5]), Ok(1));
    assert_eq!(ws[other].recv_burst(&mut b, 64), Ok(1));
    ws[other].done_burst(&mut b).unwrap();
    let mut held = Vec::new();
    ws[full].recv_burst(&mut held, 64).unwrap();
    let mut all = vec![1000u64; 16];
    ws[full].done_burst(&mut all).unwrap();
    let mut out = Vec::new();
    d.flush(&mut out, WAIT).unwrap();
    assert_eq!(out.len(), 21);
}

/// The batch is at most half the credit (with credit 4 a batch of 2): a loaded call of two
/// new flows, one per worker, stays staged; the next fills both batches.
#[test]
fn the_batch_is_bounded_by_the_credit() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(2).credit(4), u64_tag).unwrap();
    d.set_batching(usize::MAX, u32::MAX);
    let mut b = Vec::new();
    d.distribute(&mut vec![1, 2]).unwrap();
    let got = |ws: &mut Vec<Worker<u64>>, b: &mut Vec<u64>| {
        ws[0].recv_burst(b, 8).unwrap() + ws[1].recv_burst(b, 8).unwrap()
    };
    assert_eq!(got(&mut ws, &mut b), 0, "one each: below a batch of 2");
    d.distribute(&mut vec![1, 2]).unwrap();
    assert_eq!(
        got(&mut ws, &mut b),
        4,
        "two each: a batch of half the credit"
    );
}

/// What is staged when the distributor is dropped still reaches the workers, which then
/// see `Disconnected`.
#[test]
fn dropping_the_distributor_delivers_what_is_staged() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(2).credit(64), u64_tag).unwrap();
    d.set_batching(8, u32::MAX);
    // A batch of input over two workers: neither lane has a batch.
    d.distribute(&mut (0..8).collect()).unwrap();
    let mut b = Vec::new();
    assert_eq!(ws[0].recv_burst(&mut b, 64), Ok(0), "staged");
    assert_eq!(ws[1].recv_burst(&mut b, 64), Ok(0), "staged");
    drop(d);
    for w in &mut ws {
        while w.recv_burst(&mut b, 64).is_ok() {}
    }
    b.sort_unstable();
    assert_eq!(b, (0..8).collect::<Vec<_>>());
}

/// A worker that leaves while packets of its flows are staged for it: the leave is read
/// at the next call (control entries are read at once), and the staged packets follow
/// what its ring held, in order, to the other worker, ahead of the flow's new input.
#[test]
fn staged_packets_of_a_leaving_worker_go_to_another_in_order() {
    let (mut d, mut ws) = distributor::new(Config::default().workers(2).credit(64), tag).unwrap();
    d.set_batching(4, u32::MAX);
    let p = |flow, seq| Pkt { flow, seq, id: seq };
    // Four of flow 7 go out as a batch, all to worker 0.
    d.distribute(&mut (0..4).map(|s| p(7, s)).collect())
        .unwrap();
    let (mut staying, mut leaving) = (ws.pop().unwrap(), ws.pop().unwrap());
    assert!(recv_all(&mut staying).is_empty(), "flow 7 went to worker 0");
    // A loaded call: two more of flow 7 (staged at worker 0) and two new flows (staged at
    // worker 1, the least loaded): no lane has a batch.
    d.distribute(&mut vec![p(7, 4), p(7, 5), p(8, 100), p(9, 101)])
        .unwrap();
    assert!(recv_all(&mut staying).is_empty(), "staged");
    // Worker 0 takes one packet, hands it back unprocessed and leaves.
    let mut held = Vec::new();
    leaving.recv_burst(&mut held, 1).unwrap();
    assert_eq!(held, [p(7, 0)]);
    leaving.leave(held).unwrap();
    // The next call reads the leave (control entries are read at once) and sends flow 7's
    // packets, staged ones after the ring's, to worker 1 before the flow's new input.
    d.distribute(&mut vec![p(7, 6), p(7, 7)]).unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    let got: Vec<Pkt> = recv_all(&mut staying);
    let of_7: Vec<Pkt> = got.iter().copied().filter(|q| q.flow == 7).collect();
    assert_eq!(of_7, (0..8).map(|s| p(7, s)).collect::<Vec<_>>());
    assert_eq!(got.len(), 10, "and the two other flows");
    staying.done_burst(&mut got.clone()).unwrap();
    let mut out = Vec::new();
    d.flush(&mut out, WAIT).unwrap();
    assert_eq!(out.len(), 10);
}

/// The last few hand-backs of a lane with less than a batch outstanding are read by a
/// later call with input within as many calls as there are workers (one lane in turn
/// per call), so `collect` returns them without a call that has no input.
#[test]
fn a_quiet_lanes_hand_backs_come_back_within_as_many_calls_as_workers() {
    const W: usize = 4;
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(W).credit(64), u64_tag).unwrap();
    d.distribute(&mut vec![1000]).unwrap();
    d.distribute(&mut Vec::new()).unwrap(); // publishes it
    let mut b = Vec::new();
    let w = ws
        .iter_mut()
        .position(|w| w.recv_burst(&mut b, 8) == Ok(1))
        .expect("one worker got it");
    ws[w].done_burst(&mut b).unwrap();
    // Loaded calls (a batch of input each) read only the lanes due, and one in turn.
    d.set_batching(8, u32::MAX);
    let mut out = Vec::new();
    for call in 0..W as u64 {
        d.distribute(&mut (call * 100..call * 100 + 8).collect())
            .unwrap();
        d.collect(&mut out);
        if out.contains(&1000) {
            return;
        }
    }
    panic!("the hand-back was not read within {W} loaded calls");
}

/// A caller that stops distributing and only collects (its input ended) still gets
/// everything back: the second `collect` in a row publishes what is staged and reads every
/// ring, also the hand-backs of a lane with less than a batch outstanding.
#[test]
fn a_loop_of_collect_alone_brings_everything_back() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(512), u64_tag).unwrap();
    assert_eq!(d.distribute(&mut (0..32).collect()), Ok(32)); // a full batch: published
    let mut b = Vec::new();
    assert_eq!(ws[0].recv_burst(&mut b, 64), Ok(32));
    let mut rest = b.split_off(16);
    ws[0].done_burst(&mut b).unwrap();
    let mut out = Vec::new();
    d.collect(&mut out);
    ws[0].done_burst(&mut rest).unwrap();
    for _ in 0..3 {
        d.collect(&mut out);
    }
    assert_eq!(out.len(), 32, "in flight: {}", d.in_flight());
}

/// The report's loop: `distribute` only while there is input, `collect` until everything
/// is back, with two worker threads; staged packets must not stay staged.
#[test]
fn distributing_only_while_input_lasts_drains() {
    const FLOWS: u64 = 64;
    // Whole bursts: the last call is a loaded one, whose staged packets only a collect
    // can get out. (Fewer under Miri, which runs threads far slower.)
    const TOTAL: u64 = if cfg!(miri) { 4 * 32 } else { 313 * 32 };
    let (mut d, ws) = distributor::new(Config::default().workers(2).credit(512), |p: &u64| {
        *p % FLOWS
    })
    .unwrap();
    let ts: Vec<_> = ws
        .into_iter()
        .map(|mut w| {
            std::thread::spawn(move || {
                let mut b = Vec::with_capacity(32);
                while let Ok(k) = w.recv_burst(&mut b, 32) {
                    if k > 0 {
                        w.done_burst(&mut b).unwrap();
                    } else {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    let (mut next, mut back) = (0u64, 0u64);
    let mut input: Vec<u64> = Vec::with_capacity(32);
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while (next < TOTAL || back < next) && std::time::Instant::now() < deadline {
        while next < TOTAL && input.len() < 32 {
            input.push(next);
            next += 1;
        }
        if !input.is_empty() {
            d.distribute(&mut input).unwrap();
        }
        back += d.collect(&mut out) as u64;
        out.clear();
        std::thread::yield_now();
    }
    let stuck = d.in_flight();
    drop(d);
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(back, next, "{stuck} packets still in flight");
}
