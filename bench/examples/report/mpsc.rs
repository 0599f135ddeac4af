//! `mpsc_*` scenarios: the MP path with one producer (CPU 0) and the consumer (CPU 1) at
//! bursts 1, 8 and 32, against flowline's own SPSC ring and the peers; and 2 producers +
//! consumer on 2 cores (both producers on CPU 0, so they preempt each other in the middle
//! of reservations; a producer that finds the ring full yields), with the worst gap between
//! consecutive consumer receptions.

use std::hint::spin_loop;
use std::time::{Duration, Instant};

use crate::harness::{pin, Impl, Metric, Report, CPU_A, CPU_B};
use crate::spsc::{self, advance, measure, RING};

/// `fifo::mpsc` at `burst`; `lazy`: lazy release of single pops on.
fn flowline(n: u64, burst: usize, lazy: bool) -> f64 {
    let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u64>(RING).unwrap();
    advance(|v| tx.push(v).is_ok(), || rx.pop());
    rx.set_lazy_release(lazy);
    if burst == 1 {
        measure(
            n,
            1,
            move |b| usize::from(tx.push(b[0]).is_ok()),
            move |out| match rx.pop() {
                Some(v) => {
                    out[0] = v;
                    1
                }
                None => 0,
            },
        )
    } else {
        measure(
            n,
            burst,
            move |b| tx.push_burst(b),
            move |out| rx.pop_burst(out),
        )
    }
}

/// Two producers pinned to CPU_A (sharing it), consumer on CPU_B. Returns (Mitems/s, worst
/// gap between consecutive receptions in microseconds).
fn oversubscribed<P, C>(n_per: u64, make: impl FnOnce() -> (P, C)) -> Vec<f64>
where
    P: FnMut(&[u64]) -> usize + Send + Clone,
    C: FnMut(&mut [u64]) -> usize + Send,
{
    let (prod, mut cons) = make();
    let (elapsed, gap) = std::thread::scope(|s| {
        for p in 0..2u64 {
            let mut prod = prod.clone();
            s.spawn(move || {
                pin(CPU_A);
                let mut buf = [0u64; 8];
                let mut i = 0;
                while i < n_per {
                    let k = (n_per - i).min(8) as usize;
                    for (j, b) in buf[..k].iter_mut().enumerate() {
                        *b = p << 48 | (i + j as u64);
                    }
                    let mut sent = 0;
                    while sent < k {
                        let s = prod(&buf[sent..k]);
                        if s == 0 {
                            // Two producers share a core: spinning would burn the time
                            // slice the other one needs to finish its enqueue.
                            std::thread::yield_now();
                        }
                        sent += s;
                    }
                    i += k as u64;
                }
            });
        }
        drop(prod);
        let h = s.spawn(|| {
            pin(CPU_B);
            let total = 2 * n_per;
            let mut got = 0;
            let mut next = [0u64; 2];
            let mut buf = [0u64; 8];
            let t = Instant::now();
            let mut last = t;
            let mut worst = Duration::ZERO;
            while got < total {
                let k = cons(&mut buf);
                if k > 0 {
                    let now = Instant::now();
                    if got > 0 {
                        worst = worst.max(now - last);
                    }
                    last = now;
                    for &v in &buf[..k] {
                        let p = (v >> 48) as usize;
                        assert_eq!(v & 0xffff_ffff_ffff, next[p], "per-producer order");
                        next[p] += 1;
                    }
                    got += k as u64;
                } else {
                    spin_loop();
                }
            }
            (t.elapsed(), worst)
        });
        h.join().unwrap()
    });
    vec![
        2.0 * n_per as f64 / elapsed.as_secs_f64() / 1e6,
        gap.as_secs_f64() * 1e6,
    ]
}

pub fn run(r: &mut Report) {
    for burst in [1usize, 8, 32] {
        let n: u64 = match (r.quick, burst) {
            (true, _) => 100_000,
            (false, 1) => 4 << 20,
            (false, _) => 16 << 20,
        };
        let mut impls: Vec<Impl> = vec![
            (
                "flowline",
                Box::new(move || vec![flowline(n, burst, false)]),
            ),
            (
                "flowline_spsc",
                Box::new(move || {
                    vec![spsc::flowline(
                        n,
                        burst,
                        flowline::fifo::spsc::PolitePolling::default(),
                    )]
                }),
            ),
            (
                "crossbeam",
                Box::new(move || vec![spsc::crossbeam(n, burst)]),
            ),
            ("std", Box::new(move || vec![spsc::std_channel(n, burst)])),
            ("mutex", Box::new(move || vec![spsc::mutex(n, burst)])),
        ];
        let mut ratios = vec![
            ("flowline", "flowline_spsc"),
            ("flowline", "crossbeam"),
            ("flowline", "std"),
            ("flowline", "mutex"),
        ];
        if burst == 1 {
            impls.insert(
                1,
                (
                    "flowline_lazy",
                    Box::new(move || vec![flowline(n, burst, true)]),
                ),
            );
            ratios.insert(1, ("flowline", "flowline_lazy"));
        }
        r.scenario(
            &format!("mpsc_r{RING}_burst{burst}"),
            &[Metric {
                suffix: "",
                unit: "Mitems/s",
                higher_is_better: true,
            }],
            impls,
            &ratios,
        );
    }

    let n_per: u64 = if r.quick { 50_000 } else { 4 << 20 };
    let metrics = [
        Metric {
            suffix: "",
            unit: "Mitems/s",
            higher_is_better: true,
        },
        Metric {
            suffix: "_worst_gap",
            unit: "us",
            higher_is_better: false,
        },
    ];
    let impls: Vec<Impl> = vec![
        (
            "flowline",
            Box::new(move || {
                oversubscribed(n_per, || {
                    let (tx, mut rx) = flowline::fifo::mpsc::channel::<u64>(RING).unwrap();
                    let mut tx = tx;
                    let prod = move |b: &[u64]| tx.push_burst(b);
                    (prod, move |out: &mut [u64]| rx.pop_burst(out))
                })
            }),
        ),
        (
            "crossbeam",
            Box::new(move || {
                let q = std::sync::Arc::new(crossbeam_queue::ArrayQueue::<u64>::new(RING));
                let q2 = std::sync::Arc::clone(&q);
                oversubscribed(n_per, move || {
                    let prod =
                        move |b: &[u64]| b.iter().take_while(|&&v| q.push(v).is_ok()).count();
                    let cons = move |out: &mut [u64]| {
                        let mut k = 0;
                        while k < out.len() {
                            match q2.pop() {
                                Some(v) => {
                                    out[k] = v;
                                    k += 1;
                                }
                                None => break,
                            }
                        }
                        k
                    };
                    (prod, cons)
                })
            }),
        ),
        (
            "std",
            Box::new(move || {
                oversubscribed(n_per, || {
                    let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(RING);
                    let prod =
                        move |b: &[u64]| b.iter().take_while(|&&v| tx.try_send(v).is_ok()).count();
                    let cons = move |out: &mut [u64]| {
                        let mut k = 0;
                        while k < out.len() {
                            match rx.try_recv() {
                                Ok(v) => {
                                    out[k] = v;
                                    k += 1;
                                }
                                Err(_) => break,
                            }
                        }
                        k
                    };
                    (prod, cons)
                })
            }),
        ),
        (
            "mutex",
            Box::new(move || {
                let q = std::sync::Arc::new(std::sync::Mutex::new(
                    std::collections::VecDeque::<u64>::with_capacity(RING),
                ));
                let q2 = std::sync::Arc::clone(&q);
                oversubscribed(n_per, move || {
                    let prod = move |b: &[u64]| {
                        let mut g = q.lock().unwrap();
                        let k = b.len().min(RING - g.len());
                        g.extend(&b[..k]);
                        k
                    };
                    let cons = move |out: &mut [u64]| {
                        let mut g = q2.lock().unwrap();
                        let k = out.len().min(g.len());
                        for (o, v) in out.iter_mut().zip(g.drain(..k)) {
                            *o = v;
                        }
                        k
                    };
                    (prod, cons)
                })
            }),
        ),
    ];
    r.scenario(
        "mpsc_2p_oversub_burst8",
        &metrics,
        impls,
        &[
            ("flowline", "crossbeam"),
            ("flowline", "std"),
            ("flowline", "mutex"),
        ],
    );
}
