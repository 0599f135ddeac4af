//! `dist_*` scenarios: distributor on CPU 0, one worker on CPU 1, bursts of 32 (DPDK's
//! `dist_perf` shape). Packets/s and TSC cycles per packet on the distributor's thread; the
//! worker returns every packet, the distributor collects them, and the sum of the returned
//! sequence numbers is checked.
//! - `dist_1worker`: 1024 synthetic flows, round robin.
//! - `dist_pcap`: the flows of a real capture (`tests/data/loopback.pcap`, tagged by the
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

use std::sync::Arc;
use std::time::Instant;

use flowline::distributor::nodes::{self, owner_of, NodesConfig};
use flowline::distributor::{self, Config};

use crate::frames;
use crate::harness::{pair, Impl, Metric, Report};

#[inline]
fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Returns (Mpkts/s, TSC cycles per packet); packet `p` has the flow tag `tag(p)`.
fn flowline(n: u64, tag: impl Fn(u64) -> u64 + Send + 'static, burst: usize) -> Vec<f64> {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 512,
        },
        move |p: &u64| tag(*p),
    )
    .unwrap();
    let mut w = ws.pop().unwrap();
    let ((secs, cycles, sum), ()) = pair(
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
            (t.elapsed().as_secs_f64(), cycles, sum)
            // `d` drops here: the worker sees Disconnected and exits.
        },
        move || {
            let mut b = Vec::with_capacity(burst);
            while w.recv_burst(&mut b, burst).is_ok() {
                w.done_burst(&mut b).unwrap();
            }
        },
    );
    assert_eq!(sum, n * (n - 1) / 2, "returned packets' checksum");
    vec![n as f64 / secs / 1e6, cycles as f64 / n as f64]
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
/// packet, bridge publications per crossing packet).
fn two_nodes(n: u64, burst: usize) -> Vec<f64> {
    const FLOWS: u64 = 1024;
    let tag = |p: &u64| *p % FLOWS;
    let mut layout = nodes::new(
        NodesConfig {
            nodes: 2,
            workers_per_node: 1,
            credit: 512,
            bridge: 1024,
        },
        tag,
    )
    .unwrap();
    // What each node will collect: the packets of the flows it owns.
    let owned = |k: usize| {
        let flows = (0..FLOWS)
            .filter(|&f| owner_of(f, 2) == k)
            .collect::<Vec<_>>();
        let laps = n / FLOWS;
        let tail = n % FLOWS;
        flows
            .iter()
            .map(|&f| laps + u64::from(f < tail))
            .sum::<u64>()
    };
    let (expect0, expect1) = (owned(0), owned(1));
    let (node1, mut ws1) = layout.pop().unwrap();
    let (node0, mut ws0) = layout.pop().unwrap();
    let (w0, w1) = (ws0.pop().unwrap(), ws1.pop().unwrap());
    let run = move |mut node: nodes::NodeDistributor<u64, _>,
                    mut w: distributor::Worker<u64>,
                    first: u64,
                    expect: u64| {
        let t = Instant::now();
        let mut next = first;
        let mut input: Vec<u64> = Vec::with_capacity(burst);
        let mut out: Vec<u64> = Vec::with_capacity(4096);
        let mut b: Vec<u64> = Vec::with_capacity(512);
        let (mut got, mut sum) = (0u64, 0u64);
        while got < expect || next < n || !input.is_empty() {
            while input.len() < burst && next < n {
                input.push(next);
                next += 2;
            }
            node.distribute(&mut input).unwrap();
            // The node's worker, on the node's own thread.
            if w.recv_burst(&mut b, 512).unwrap() > 0 {
                w.done_burst(&mut b).unwrap();
            }
            got += node.collect(&mut out) as u64;
            for &p in &out {
                sum = sum.wrapping_add(p);
            }
            out.clear();
        }
        (t.elapsed().as_secs_f64(), sum, node.bridge_stats())
    };
    let ((s0, sum0, b0), (s1, sum1, b1)) = pair(
        move || run(node0, w0, 0, expect0),
        move || run(node1, w1, 1, expect1),
    );
    assert_eq!(
        sum0.wrapping_add(sum1),
        n * (n - 1) / 2,
        "returned packets' checksum"
    );
    let crossed = (b0.sent + b1.sent) as f64;
    vec![
        n as f64 / s0.max(s1) / 1e6,
        crossed / n as f64,
        (b0.bursts + b1.bursts) as f64 / crossed.max(1.0),
    ]
}

pub fn run(r: &mut Report) {
    let n: u64 = if r.quick { 200_000 } else { 16 << 20 };
    let synthetic = move |p: u64| p % 1024;
    let impls: Vec<Impl> = vec![("flowline", Box::new(move || flowline(n, synthetic, 32)))];
    r.scenario("dist_1worker", METRICS, impls, &[]);
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
        ("flowline_2nodes", Box::new(move || two_nodes(n, 32))),
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
