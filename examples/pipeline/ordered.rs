//! The pipeline demo's ordered forms: `--ordered` (one ordered distributor: any worker takes
//! any packet, the packets leave in the order they came in) and `--two-stage` (an ordered
//! stage for stateless work, then an atomic stage whose workers keep per-flow state).

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowline::distributor::{self, Config, Worker};
use flowline::topology;
use flowline::wait::WaitError;

use super::{zipf_cdf, Opts, Packet, Rng};

/// The demo's worker (the atomic form's, and stage one's here): spin `work` iterations
/// per packet (think: a checksum), re-tag a fraction into a second-stage flow (think:
/// decapsulated) and reschedule it, drop a fraction, hand the rest back. When idle it
/// spins briefly, yields, then sleeps until the distributor sends (the default wait
/// strategy): with more threads than CPUs a spinning worker would hold the core the
/// distributor needs. Returns when the distributor is gone.
pub(crate) fn stateless_worker(mut w: Worker<Packet>, o: &Opts, cpu: usize) {
    let _ = topology::pin_current_thread(cpu);
    let resched_cut = (o.resched * u64::MAX as f64) as u64;
    let drop_cut = resched_cut.saturating_add((o.drop * u64::MAX as f64) as u64);
    let mut rng = Rng(0x9e37_79b9 ^ (w.id() as u64 + 1));
    let (mut burst, mut done) = (Vec::new(), Vec::new());
    while w.recv_burst_wait(&mut burst, 64, Duration::MAX).is_ok() {
        for mut p in burst.drain(..) {
            for i in 0..o.work {
                std::hint::black_box(i);
            }
            let r = rng.next();
            if r < resched_cut && p.flow < o.flows {
                w.done_burst(&mut done).unwrap();
                p.flow += o.flows;
                w.reschedule(p).unwrap();
            } else if r < drop_cut {
                w.done_burst(&mut done).unwrap();
                w.drop_packet(p).unwrap();
            } else {
                done.push(p);
            }
        }
        w.done_burst(&mut done).unwrap();
    }
}

/// Stage-two work: per-flow state (the next position each flow may show), which only an
/// atomic stage can keep without locks; a packet behind its flow's state counts as a
/// violation. Flows from `flows` on hold packets stage one rescheduled: each was accepted
/// again as new, in the order the reschedules reached the distributor, which is not their
/// flow's order when two workers rescheduled them, so only their count is checked.
fn stateful_worker(mut w: Worker<Packet>, cpu: usize, flows: u32, violations: &AtomicU64) {
    let _ = topology::pin_current_thread(cpu);
    let mut next: HashMap<u32, u32> = HashMap::new();
    let mut burst = Vec::new();
    while w.recv_burst_wait(&mut burst, 64, Duration::MAX).is_ok() {
        for p in burst.iter().filter(|p| p.flow < flows) {
            let e = next.entry(p.flow).or_insert(0);
            if p.seq < *e {
                violations.fetch_add(1, Ordering::Relaxed);
            }
            *e = p.seq + 1;
        }
        w.done_burst(&mut burst).unwrap();
    }
}

/// `--ordered` and `--two-stage`: see the module docs. The checks on the way out: the
/// packets that were not rescheduled leave stage one in the order they were generated
/// (ids increase), every flow is in order at the end, every packet comes back exactly
/// once; with two stages, no stage-two worker saw a flow go backwards. (Rescheduled
/// packets are accepted again as new: they are counted, not ordered.)
pub(crate) fn run(o: &Opts, two_stage: bool) -> ExitCode {
    let config = Config::default().workers(o.workers).credit(o.credit);
    let window = 4 * o.workers * o.credit;
    let made = distributor::new_ordered::<Packet>(config, window).and_then(|one| {
        let two = if two_stage {
            Some(distributor::new(config, |p: &Packet| u64::from(p.flow))?)
        } else {
            None
        };
        Ok((one, two))
    });
    let ((mut first, w1), second) = match made {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let cpus = topology::available_cpus();
    if let Err(e) = topology::pin_current_thread(0) {
        eprintln!("note: not pinned ({e})");
    }
    println!(
        "pipeline: {}, {} flows (zipf {}), reschedule {}, drop {}, {} s; {} CPUs",
        super::workers_text(
            o.workers,
            if two_stage {
                "ordered + atomic "
            } else {
                "ordered "
            }
        ),
        o.flows,
        o.zipf,
        o.resched,
        o.drop,
        o.seconds,
        cpus
    );
    let cpu_of = |k: usize| 1 + k % cpus.max(2).saturating_sub(1);
    let violations = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for w in w1 {
        let (o2, cpu) = (o.clone(), cpu_of(w.id()));
        threads.push(std::thread::spawn(move || stateless_worker(w, &o2, cpu)));
    }
    let mut second = second.map(|(d, ws)| {
        for w in ws {
            let (v, cpu) = (Arc::clone(&violations), cpu_of(o.workers + w.id()));
            let flows = o.flows;
            threads.push(std::thread::spawn(move || {
                stateful_worker(w, cpu, flows, &v)
            }));
        }
        d
    });

    let cdf = zipf_cdf(o.flows, o.zipf);
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut next_seq = vec![0u32; o.flows as usize];
    let mut expect: HashMap<u32, u32> = HashMap::new();
    let (mut order_violations, mut global_violations) = (0u64, 0u64);
    let (mut sent, mut returned, mut sum_in, mut sum_out) = (0u64, 0u64, 0u64, 0u64);
    let mut last_id: Option<u64> = None;
    let (mut input, mut mid, mut out) = (Vec::new(), Vec::new(), Vec::new());
    let start = Instant::now();
    let run_for = Duration::from_secs_f64(o.seconds);
    let (mut last_tick, mut last_returned) = (start, 0u64);
    let mut last_per: Vec<u64> = vec![0; o.workers];
    let stats = first.stats();
    let tick = Duration::from_millis(100);
    let mut generating = true;
    loop {
        if generating {
            while input.len() < o.burst {
                let f = cdf
                    .partition_point(|&c| c < rng.unit())
                    .min(o.flows as usize - 1);
                let p = Packet {
                    flow: f as u32,
                    seq: next_seq[f],
                    id: sent,
                    stage: 0,
                };
                next_seq[f] += 1;
                sum_in = sum_in.wrapping_add(p.id);
                sent += 1;
                input.push(p);
            }
        }
        // Stage one takes input only while stage two keeps up: what stage one hands back
        // frees its credit as soon as it is read, so its output is the place to hold back.
        let start_mid = mid.len();
        if mid.len() < 4 * o.burst {
            if let Err(WaitError::Disconnected) = first.distribute_wait(&mut input, tick) {
                eprintln!("all workers left");
                break;
            }
            if generating {
                first.collect(&mut mid);
            } else {
                let _ = first.collect_wait(&mut mid, tick);
            }
        }
        for p in &mid[start_mid..] {
            if p.flow < o.flows {
                if last_id.is_some_and(|l| p.id <= l) {
                    global_violations += 1;
                }
                last_id = Some(p.id);
            }
        }
        match second.as_mut() {
            Some(d) => {
                if d.distribute(&mut mid).is_err() {
                    eprintln!("all stage-two workers left");
                    break;
                }
                d.collect(&mut out);
            }
            None => out.append(&mut mid),
        }
        for p in out.drain(..) {
            // Rescheduled packets (flows from `o.flows` on) were accepted again as new:
            // counted, not ordered (see `stateful_worker`).
            if p.flow < o.flows {
                let e = expect.entry(p.flow).or_insert(0);
                if p.seq < *e {
                    order_violations += 1;
                }
                *e = p.seq + 1;
            }
            sum_out = sum_out.wrapping_add(p.id);
            returned += 1;
        }
        let in_flight = first.in_flight()
            + first.waiting_for_order()
            + mid.len()
            + second.as_ref().map_or(0, |d| d.in_flight());
        let now = Instant::now();
        if now - last_tick >= Duration::from_secs(1) {
            let per: Vec<u64> = (0..o.workers)
                .map(|i| first.worker_completed(i).unwrap_or(0))
                .collect();
            let total: u64 = per.iter().zip(&last_per).map(|(a, b)| a - b).sum();
            let shares: Vec<String> = per
                .iter()
                .zip(&last_per)
                .map(|(a, b)| format!("{:.0}%", 100.0 * (a - b) as f64 / total.max(1) as f64))
                .collect();
            println!(
                "{:5.1}s  {:7.2} Mpps  stage-one share [{}]  in flight {:5}  waiting for order {:5}",
                (now - start).as_secs_f64(),
                (returned - last_returned) as f64 / (now - last_tick).as_secs_f64() / 1e6,
                shares.join(" "),
                in_flight,
                first.waiting_for_order(),
            );
            (last_tick, last_returned, last_per) = (now, returned, per);
        }
        if generating && now - start >= run_for {
            generating = false;
        }
        if !generating && input.is_empty() && in_flight == 0 {
            break;
        }
    }
    let mut rest = Vec::new();
    let mut flushed = first.flush(&mut rest, Duration::from_secs(10)).is_ok();
    if let Some(d) = second.as_mut() {
        rest.append(&mut mid);
        while !rest.is_empty()
            && d.distribute_wait(&mut rest, Duration::from_secs(10))
                .is_ok()
        {}
        let mut tail = Vec::new();
        flushed &= d.flush(&mut tail, Duration::from_secs(10)).is_ok();
        rest = tail;
    }
    for p in rest {
        sum_out = sum_out.wrapping_add(p.id);
        returned += 1;
    }
    let s = stats.snapshot();
    let dropped = s.get("dropped").unwrap_or(0);
    let elapsed = start.elapsed().as_secs_f64();
    drop(first);
    drop(second);
    for t in threads {
        t.join().unwrap();
    }
    let stage_two = violations.load(Ordering::Relaxed);
    let exactly_once = returned + dropped == sent && (dropped > 0 || sum_in == sum_out);
    println!(
        "summary: {sent} packets in {elapsed:.1} s ({:.2} Mpps); returned {returned}, dropped \
         {dropped}, rescheduled {}; flush {}",
        sent as f64 / elapsed / 1e6,
        s.get("rescheduled").unwrap_or(0),
        if flushed { "ok" } else { "FAILED" },
    );
    let fine = order_violations == 0 && global_violations == 0 && stage_two == 0;
    println!(
        "order check: {}; exactly once: {}",
        if fine {
            "arrival order kept, every flow in order".to_string()
        } else {
            format!(
                "{global_violations} out of arrival order, {order_violations} flow VIOLATIONS, \
                 {stage_two} at stage two"
            )
        },
        if exactly_once { "yes" } else { "NO" }
    );
    if fine && exactly_once && flushed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
