//! `dist_*` scenarios: distributor on CPU 0, one worker on CPU 1, bursts of 32 (DPDK's
//! `dist_perf` shape). Packets/s and TSC cycles per packet on the distributor's thread; the
//! worker returns every packet, the distributor collects them, and the sum of the returned
//! sequence numbers is checked.
//! - `dist_1worker`: 1024 synthetic flows, round robin.
//! - `dist_any_order_1worker`: the same, the worker handing each burst back in reverse
//!   (`Worker::done_at` by ticket), against in-order hand-backs in the same run.
//! - `dist_ordered_1worker`: an ordered distributor (`distributor::new_ordered`, a reorder
//!   window of 4 credits per worker), against the atomic one in the same run.
//! - `dist_ordered_elephant_2workers`: every packet of one flow, two workers driven in turn
//!   by one thread on CPU 1: ordered (the flow spreads over both) against atomic (the flow
//!   stays on one worker). Third figure: the smallest worker's share of the packets.
//! - `dist_pcap`: the flows of a real capture (`bench/tests/data/loopback.pcap`, tagged by the
//!   symmetric RSS hash of each frame's 5-tuple, as the `pcap_replay` example does), looped
//!   with a flow salt per lap, next to the synthetic flows in the same run.
//! - `dist_2nodes`: the multi-node layout (`distributor::nodes`) on 2 simulated nodes, node 0
//!   on CPU 0 and node 1 on CPU 1, each with one worker driven inline by the node's own
//!   thread (the worker shares its node's CPU), packets entering at both nodes (even
//!   sequence numbers at node 0, odd at node 1; 1024 flows, owned by hash); against
//!   `flowline_remote_worker`, the same packets through one distributor on CPU 0 whose
//!   worker is on CPU 1 (the layout the DPDK study found slow across sockets). Second
//!   figure: packets moved between the two CPUs per packet (the remote worker's layout:
//!   2, out and back; the nodes: the share that crossed a bridge). Both nodes share one
//!   socket here, so this shows the protocol's cost, not a socket link's.
//! - `dist_2nodes_migrating`: the same 2-node traffic while each node keeps one migration
//!   of a bucket of its flows to the other node in progress (`NodeDistributor::migrate`),
//!   against the same layout without migrations: Mpkts/s, the median handover time (from
//!   `migrate` to `migrating()` false, in us), handovers per second, and packets held at
//!   the new owner per handover (the packets a migration delayed).
//! - `dist_2nodes_balance`: an overload: every flow belongs to node 0 at the start (packets
//!   entering at both nodes), and each node's inline worker spends `SKEW_WORK` spin hints
//!   per packet, so node 0 runs out of credit while node 1 idles. With balancing on at
//!   both nodes (`NodeDistributor::set_balance`, default policy but a sample every 16
//!   calls), against the same run without it: Mpkts/s, the time from the start until node
//!   1 does at least 40% of the work over a window of 8192 packets (ms; inf if never), the
//!   packets held at a new owner (the packets the migrations delayed) and the migrations
//!   the policy started.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_utils::CachePadded;

use flowline::distributor::nodes::{self, BalancePolicy, NodesConfig};
use flowline::distributor::{self, Config};

use crate::frames;
use crate::harness::{pair, tsc, Impl, Metric, Report};

/// Returns (Mpkts/s, TSC cycles per packet); packet `p` has the flow tag `tag(p)`.
fn flowline(n: u64, tag: impl Fn(u64) -> u64 + Send + 'static, burst: usize) -> Vec<f64> {
    flowline_handing_back(n, tag, burst, false)
}

/// [`flowline`], the worker handing each burst back in reverse (`done_at` by ticket, newest
/// first) when `reverse`; the bursts' packets must then be of distinct flows.
fn flowline_handing_back(
    n: u64,
    tag: impl Fn(u64) -> u64 + Send + 'static,
    burst: usize,
    reverse: bool,
) -> Vec<f64> {
    let (d, ws) = distributor::new(Config::default().workers(1).credit(512), move |p: &u64| {
        tag(*p)
    })
    .unwrap();
    let mut v = drive(d, ws, n, burst, reverse);
    v.truncate(2);
    v
}

/// An ordered distributor (`distributor::new_ordered`, window 4 credits per worker) with
/// `workers` workers: (Mpkts/s, TSC cycles per packet, smallest worker share in %).
fn ordered(n: u64, workers: usize, burst: usize) -> Vec<f64> {
    let credit = 512;
    let (d, ws) = distributor::new_ordered(
        Config::default().workers(workers).credit(credit),
        4 * workers * credit,
    )
    .unwrap();
    drive(d, ws, n, burst, false)
}

/// An atomic distributor with `workers` workers and every packet of one flow:
/// (Mpkts/s, TSC cycles per packet, smallest worker share in %).
fn atomic_elephant(n: u64, workers: usize, burst: usize) -> Vec<f64> {
    let (d, ws) =
        distributor::new(Config::default().workers(workers).credit(512), |_: &u64| 7).unwrap();
    drive(d, ws, n, burst, false)
}

/// Runs `n` packets (sequence numbers) in bursts through `d` on CPU 0, its workers driven
/// in turn by one thread on CPU 1 (each takes what it has and hands it back, in reverse
/// with `reverse`), checks the returned packets' sum, and returns (Mpkts/s, TSC cycles
/// per packet on the distributor's thread, the smallest worker's share of the packets
/// in %).
fn drive<S: distributor::Schedule<u64> + Send + 'static>(
    mut d: distributor::Distributor<u64, S>,
    mut ws: Vec<distributor::Worker<u64>>,
    n: u64,
    burst: usize,
    reverse: bool,
) -> Vec<f64> {
    let workers = ws.len();
    let ((secs, cycles, sum, share), ()) = pair(
        move || {
            let t = Instant::now();
            let c0 = tsc();
            let mut next = 0u64;
            let mut input: Vec<u64> = Vec::with_capacity(burst);
            let mut out: Vec<u64> = Vec::with_capacity(4096);
            let mut back = 0u64;
            let mut sum = 0u64;
            while back < n {
                while input.len() < burst && next < n {
                    input.push(next);
                    next += 1;
                }
                if !input.is_empty() {
                    d.distribute(&mut input).unwrap();
                }
                d.collect(&mut out);
                back += out.len() as u64;
                for &p in &out {
                    sum = sum.wrapping_add(p);
                }
                out.clear();
            }
            let cycles = tsc() - c0;
            let least = (0..workers)
                .map(|i| d.worker_completed(i).unwrap_or(0))
                .min()
                .unwrap_or(0);
            let share = least as f64 * 100.0 / n as f64;
            (t.elapsed().as_secs_f64(), cycles, sum, share)
            // `d` drops here: the workers see Disconnected and exit.
        },
        move || {
            let mut b = Vec::with_capacity(burst);
            loop {
                let mut live = false;
                for w in ws.iter_mut() {
                    let first = w.next_ticket();
                    if w.recv_burst(&mut b, burst).is_err() {
                        continue;
                    }
                    live = true;
                    if reverse {
                        while let Some(p) = b.pop() {
                            w.done_at(first.nth(b.len()), p).unwrap();
                        }
                    } else {
                        w.done_burst(&mut b).unwrap();
                    }
                }
                if !live {
                    break;
                }
            }
        },
    );
    assert_eq!(sum, n * (n - 1) / 2, "returned packets' checksum");
    vec![n as f64 / secs / 1e6, cycles as f64 / n as f64, share]
}

/// Packets per second through the distributor, and TSC cycles per packet on its thread.
const METRICS: &[Metric] = &[
    Metric {
        suffix: "",
        unit: "Mpkts/s",
        higher_is_better: true,
    },
    Metric {
        suffix: "_cycles",
        unit: "tsc_cycles/pkt",
        higher_is_better: false,
    },
];

/// The capture's per-frame tags (the symmetric RSS hash of each frame's 5-tuple).
fn capture_tags() -> Arc<Vec<u64>> {
    let cap = frames::read_capture(include_bytes!("../../tests/data/loopback.pcap"))
        .expect("the committed capture reads");
    let ing = frames::Ingest::new(&cap);
    Arc::new(ing.parsed.iter().map(|p| u64::from(p.rss)).collect())
}

/// The 2-node layout: returns (Mpkts/s over both nodes, packets that crossed a bridge per
/// packet, bridge publications per crossing packet, and with `migrate`: the median
/// handover time in us, handovers completed per second, packets held per handover). With
/// `migrate`, each node keeps one migration of a bucket it owns to the other node in
/// progress while its input lasts (the next starts when one completes).
fn two_nodes(n: u64, burst: usize, migrate: bool) -> Vec<f64> {
    const FLOWS: u64 = 1024;
    let tag = |p: &u64| *p % FLOWS;
    let mut layout = nodes::new(
        NodesConfig::default()
            .nodes(2)
            .workers_per_node(1)
            .credit(512)
            .bridge(1024),
        tag,
    )
    .unwrap();
    let (node1, mut ws1) = layout.pop().unwrap();
    let (node0, mut ws0) = layout.pop().unwrap();
    let (w0, w1) = (ws0.pop().unwrap(), ws1.pop().unwrap());
    // Packets collected at both nodes (a flow's packets come back wherever it ran),
    // published every 4096 and at the end, so the count costs no line per packet.
    let collected = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let run = move |mut node: nodes::NodeDistributor<u64, _>,
                    mut w: distributor::Worker<u64>,
                    first: u64,
                    collected: Arc<CachePadded<AtomicU64>>| {
        let t = Instant::now();
        let id = node.id();
        let mut next = first;
        let mut input: Vec<u64> = Vec::with_capacity(burst);
        let mut out: Vec<u64> = Vec::with_capacity(4096);
        let mut b: Vec<u64> = Vec::with_capacity(512);
        let (mut got, mut unpublished, mut sum) = (0u64, 0u64, 0u64);
        let mut handovers: Vec<f64> = Vec::new();
        let mut started: Option<Instant> = None;
        let mut pick = id as u64;
        // Relaxed: a progress count; the checksum is checked after the threads joined.
        while collected.load(Ordering::Relaxed) < n {
            if migrate && next < n && !node.migrating() {
                if let Some(s) = started.take() {
                    handovers.push(s.elapsed().as_secs_f64() * 1e6);
                }
                // The next flow this node owns, in a fixed stride over the flows (if it
                // still owns any).
                let f = (0..FLOWS)
                    .map(|_| {
                        pick = (pick + 37) % FLOWS;
                        pick
                    })
                    .find(|&f| node.owns(f));
                if let Some(f) = f {
                    if node.migrate(nodes::bucket_of(f), 1 - id).is_ok() {
                        started = Some(Instant::now());
                    }
                }
            }
            while input.len() < burst && next < n {
                input.push(next);
                next += 2;
            }
            node.distribute(&mut input).unwrap();
            // The node's worker, on the node's own thread.
            if w.recv_burst(&mut b, 512).unwrap() > 0 {
                w.done_burst(&mut b).unwrap();
            }
            let k = node.collect(&mut out) as u64;
            got += k;
            unpublished += k;
            for &p in &out {
                sum = sum.wrapping_add(p);
            }
            out.clear();
            if unpublished >= 4096 || (next >= n && unpublished > 0) {
                collected.fetch_add(unpublished, Ordering::Relaxed);
                unpublished = 0;
            }
        }
        let _ = got;
        (
            t.elapsed().as_secs_f64(),
            sum,
            node.bridge_stats(),
            handovers,
        )
    };
    let c0 = Arc::clone(&collected);
    let ((s0, sum0, b0, mut h0), (s1, sum1, b1, h1)) = pair(
        move || run(node0, w0, 0, c0),
        move || run(node1, w1, 1, collected),
    );
    assert_eq!(
        sum0.wrapping_add(sum1),
        n * (n - 1) / 2,
        "returned packets' checksum"
    );
    let crossed = (b0.sent + b1.sent) as f64;
    let secs = s0.max(s1);
    let mut v = vec![
        n as f64 / secs / 1e6,
        crossed / n as f64,
        (b0.bursts + b1.bursts) as f64 / crossed.max(1.0),
    ];
    if migrate {
        h0.extend(h1);
        h0.sort_by(f64::total_cmp);
        let done = (b0.migrations + b1.migrations) as f64;
        v.push(h0.get(h0.len() / 2).copied().unwrap_or(f64::NAN));
        v.push(done / secs);
        v.push((b0.held + b1.held) as f64 / done.max(1.0));
    }
    v
}

/// Spin hints of work per packet in `dist_2nodes_balance`'s inline workers.
const SKEW_WORK: u32 = 32;

/// `dist_2nodes_balance`: returns (Mpkts/s, ms until balanced, packets held at new owners,
/// migrations started by the policy).
fn two_nodes_skewed(n: u64, balance: bool) -> Vec<f64> {
    const FLOWS: u64 = 256;
    // Flows 0..FLOWS mapped onto tags node 0 owns at the start.
    let tags: Arc<Vec<u64>> = Arc::new(
        (0u64..)
            .filter(|&t| nodes::owner_of(t, 2) == 0)
            .take(FLOWS as usize)
            .collect(),
    );
    let tag = move |p: &u64| tags[(*p % FLOWS) as usize];
    let mut layout = nodes::new(
        NodesConfig::default()
            .nodes(2)
            .workers_per_node(1)
            .credit(256)
            .bridge(1024),
        tag,
    )
    .unwrap();
    let policy = BalancePolicy {
        period: 16,
        ..BalancePolicy::default()
    };
    for (node, _) in layout.iter_mut() {
        node.set_balance(balance.then_some(policy)).unwrap();
    }
    let (node1, mut ws1) = layout.pop().unwrap();
    let (node0, mut ws0) = layout.pop().unwrap();
    let (w0, w1) = (ws0.pop().unwrap(), ws1.pop().unwrap());
    // Packets processed per node, published every 256 (a count, read for the balance
    // check; Relaxed: progress counts only).
    let done: Arc<[CachePadded<AtomicU64>; 2]> = Arc::new(Default::default());
    let start = Instant::now();
    let run = move |mut node: nodes::NodeDistributor<u64, _>,
                    mut w: distributor::Worker<u64>,
                    first: u64,
                    done: Arc<[CachePadded<AtomicU64>; 2]>| {
        let id = node.id();
        let mut next = first;
        let mut input: Vec<u64> = Vec::with_capacity(32);
        let mut out: Vec<u64> = Vec::with_capacity(4096);
        let mut b: Vec<u64> = Vec::with_capacity(64);
        let (mut sum, mut mine, mut unpublished) = (0u64, 0u64, 0u64);
        let mut window = (0u64, 0u64);
        let mut balanced_at = f64::INFINITY;
        let total = |d: &[CachePadded<AtomicU64>; 2]| {
            (d[0].load(Ordering::Relaxed), d[1].load(Ordering::Relaxed))
        };
        while {
            let (a, c) = total(&done);
            a + c < n
        } {
            while input.len() < 32 && next < n {
                input.push(next);
                next += 2;
            }
            node.distribute(&mut input).unwrap();
            // The node's worker, on the node's own thread: at most 64 packets per call,
            // each costing SKEW_WORK spin hints.
            let k = w.recv_burst(&mut b, 64).unwrap();
            for _ in 0..k * SKEW_WORK as usize {
                core::hint::spin_loop();
            }
            if k > 0 {
                w.done_burst(&mut b).unwrap();
            }
            mine += k as u64;
            unpublished += k as u64;
            node.collect(&mut out);
            for &p in &out {
                sum = sum.wrapping_add(p);
            }
            out.clear();
            if unpublished >= 256 || (next >= n && unpublished > 0) {
                done[id].fetch_add(unpublished, Ordering::Relaxed);
                unpublished = 0;
            }
            // Node 0 watches for the balance: node 1 doing 40% of a window of 8192.
            if id == 0 && balanced_at.is_infinite() {
                let (a, c) = total(&done);
                if a + c - window.0 - window.1 >= 8192 {
                    if (c - window.1) * 10 >= (a + c - window.0 - window.1) * 4 {
                        balanced_at = start.elapsed().as_secs_f64() * 1e3;
                    }
                    window = (a, c);
                }
            }
        }
        let _ = mine;
        (sum, node.bridge_stats(), balanced_at)
    };
    let d0 = Arc::clone(&done);
    let ((sum0, b0, balanced_at), (sum1, b1, _)) = pair(
        move || run(node0, w0, 0, d0),
        move || run(node1, w1, 1, done),
    );
    let secs = start.elapsed().as_secs_f64();
    // Every packet was collected once at one node or the other.
    assert_eq!(sum0.wrapping_add(sum1), n * (n - 1) / 2, "checksum");
    vec![
        n as f64 / secs / 1e6,
        balanced_at,
        (b0.held + b1.held) as f64,
        (b0.rebalances + b1.rebalances) as f64,
    ]
}

pub fn run(r: &mut Report) {
    let n: u64 = if r.quick { 200_000 } else { 16 << 20 };
    let synthetic = move |p: u64| p % 1024;
    let impls: Vec<Impl> = vec![("flowline", Box::new(move || flowline(n, synthetic, 32)))];
    r.scenario("dist_1worker", METRICS, impls, &[]);
    // Hand-backs in any order across flows: each burst of 32 (32 flows) handed back in
    // reverse, every packet but the oldest waiting on the worker until the oldest is back,
    // against in-order hand-backs in the same run.
    let impls: Vec<Impl> = vec![
        (
            "flowline_any_order",
            Box::new(move || flowline_handing_back(n, synthetic, 32, true)),
        ),
        ("flowline", Box::new(move || flowline(n, synthetic, 32))),
    ];
    r.scenario(
        "dist_any_order_1worker",
        METRICS,
        impls,
        &[("flowline_any_order", "flowline")],
    );
    // Ordered scheduling: one worker, against the atomic distributor in the same run.
    let impls: Vec<Impl> = vec![
        (
            "flowline_ordered",
            Box::new(move || {
                let mut v = ordered(n, 1, 32);
                v.truncate(2);
                v
            }),
        ),
        ("flowline", Box::new(move || flowline(n, synthetic, 32))),
    ];
    r.scenario(
        "dist_ordered_1worker",
        METRICS,
        impls,
        &[("flowline_ordered", "flowline")],
    );
    // One elephant flow over 2 workers: ordered spreads it (smallest share near 50%), an
    // atomic distributor keeps it on one worker (0%).
    let share_metrics = [
        METRICS[0],
        METRICS[1],
        Metric {
            suffix: "_share",
            unit: "pct_smallest_worker",
            higher_is_better: true,
        },
    ];
    let impls: Vec<Impl> = vec![
        ("flowline_ordered", Box::new(move || ordered(n, 2, 32))),
        (
            "flowline_atomic",
            Box::new(move || atomic_elephant(n, 2, 32)),
        ),
    ];
    r.scenario(
        "dist_ordered_elephant_2workers",
        &share_metrics,
        impls,
        &[("flowline_ordered", "flowline_atomic")],
    );
    let node_metrics = [
        METRICS[0],
        Metric {
            suffix: "_moves",
            unit: "cross_cpu_moves/pkt",
            higher_is_better: false,
        },
        Metric {
            suffix: "_pubs",
            unit: "bridge_publications/crossing_pkt",
            higher_is_better: false,
        },
    ];
    let impls: Vec<Impl> = vec![
        ("flowline_2nodes", Box::new(move || two_nodes(n, 32, false))),
        (
            "flowline_remote_worker",
            Box::new(move || {
                let v = flowline(n, synthetic, 32);
                // Every packet goes to the other CPU and comes back; no bridge.
                vec![v[0], 2.0, 0.0]
            }),
        ),
    ];
    r.scenario(
        "dist_2nodes",
        &node_metrics,
        impls,
        &[("flowline_2nodes", "flowline_remote_worker")],
    );
    // Migrations under the same traffic: each node keeps moving buckets of its flows to
    // the other node; against the same layout without migrations, in the same run.
    let mut migrating_metrics = node_metrics.to_vec();
    migrating_metrics.extend([
        Metric {
            suffix: "_handover",
            unit: "us_median",
            higher_is_better: false,
        },
        Metric {
            suffix: "_handovers",
            unit: "per_s",
            higher_is_better: true,
        },
        Metric {
            suffix: "_held",
            unit: "pkts_held/handover",
            higher_is_better: false,
        },
    ]);
    let impls: Vec<Impl> = vec![
        (
            "flowline_migrating",
            Box::new(move || two_nodes(n, 32, true)),
        ),
        (
            "flowline_fixed",
            Box::new(move || {
                let mut v = two_nodes(n, 32, false);
                v.extend([0.0, 0.0, 0.0]);
                v
            }),
        ),
    ];
    r.scenario(
        "dist_2nodes_migrating",
        &migrating_metrics,
        impls,
        &[("flowline_migrating", "flowline_fixed")],
    );
    let skew_n: u64 = if r.quick { 200_000 } else { 1 << 20 };
    let balance_metrics = [
        METRICS[0],
        Metric {
            suffix: "_to_balance",
            unit: "ms",
            higher_is_better: false,
        },
        Metric {
            suffix: "_held",
            unit: "pkts_held",
            higher_is_better: false,
        },
        Metric {
            suffix: "_rebalances",
            unit: "migrations",
            higher_is_better: false,
        },
    ];
    let impls: Vec<Impl> = vec![
        (
            "flowline_balancing",
            Box::new(move || two_nodes_skewed(skew_n, true)),
        ),
        (
            "flowline_unbalanced",
            Box::new(move || two_nodes_skewed(skew_n, false)),
        ),
    ];
    r.scenario(
        "dist_2nodes_balance",
        &balance_metrics,
        impls,
        &[("flowline_balancing", "flowline_unbalanced")],
    );
    if r.wants("dist_pcap") {
        let tags = capture_tags();
        let nf = tags.len() as u64;
        // Lap `p / nf` salts the high half: each lap's flows are new flows.
        let capture = move |p: u64| (p / nf) << 32 | tags[(p % nf) as usize];
        let impls: Vec<Impl> = vec![
            (
                "flowline_capture",
                Box::new(move || flowline(n, capture.clone(), 32)),
            ),
            (
                "flowline_synthetic",
                Box::new(move || flowline(n, synthetic, 32)),
            ),
        ];
        r.scenario(
            "dist_pcap",
            METRICS,
            impls,
            &[("flowline_capture", "flowline_synthetic")],
        );
    }
}
