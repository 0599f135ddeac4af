//! Criterion micro-benchmarks for assign-unless-equal, one thread, side by side with an
//! unconditional store. The cross-core scenarios (the virtio shape, writer + reader) are in
//! the report (`bench/examples/report`), which pins threads and tracks the VM's placement.

use core::sync::atomic::{AtomicU64, Ordering};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use crossbeam_utils::CachePadded;
use flowline::cell::AssignUnlessEqual;

fn one_thread(c: &mut Criterion) {
    let x = CachePadded::new(AtomicU64::new(1));
    let mut g = c.benchmark_group("cell_1thread_unchanged");
    g.bench_function("store", |b| {
        b.iter(|| x.store(black_box(1), Ordering::Release))
    });
    g.bench_function("flowline", |b| {
        b.iter(|| x.assign_unless_equal(black_box(1), Ordering::Release))
    });
    g.finish();

    let mut g = c.benchmark_group("cell_1thread_changing");
    let mut v = 0u64;
    g.bench_function("store", |b| {
        b.iter(|| {
            v ^= 1;
            x.store(black_box(v), Ordering::Release)
        })
    });
    g.bench_function("flowline", |b| {
        b.iter(|| {
            v ^= 1;
            x.assign_unless_equal(black_box(v), Ordering::Release)
        })
    });
    g.finish();
}

criterion_group!(benches, one_thread);
criterion_main!(benches);
