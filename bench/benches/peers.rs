//! Instruction counts of the peers' rings in the shapes of flowline's (see
//! `instructions.rs`): rtrb 0.4 and crossbeam's `ArrayQueue`, in a binary of their own, so
//! that a change to flowline's code cannot move how the compiler splits and inlines theirs
//! (it did: crossbeam's count moved by 24% with flowline benchmarks added beside it).
//!
//! Run: `cargo bench -p flowline-bench --bench instructions --bench peers`.

use std::hint::black_box;

use iai_callgrind::{library_benchmark, library_benchmark_group, main};

#[macro_use]
mod shapes;
use shapes::{N, RING};

type Rtrb = (rtrb::Producer<u64>, rtrb::Consumer<u64>);

fn rtrb_ring() -> Rtrb {
    let (mut tx, rx) = rtrb::RingBuffer::<u64>::new(RING);
    for i in 0..RING as u64 / 2 {
        tx.push(i).unwrap();
    }
    (tx, rx)
}

fn array_queue() -> crossbeam_queue::ArrayQueue<u64> {
    let q = crossbeam_queue::ArrayQueue::new(RING);
    for i in 0..RING as u64 / 2 {
        q.push(i).unwrap();
    }
    q
}

single!(rtrb_single, rtrb_ring: Rtrb, |tx, v| tx.push(v).unwrap(), |rx| rx
    .pop()
    .unwrap());

#[library_benchmark]
#[bench::n(setup = array_queue)]
fn crossbeam_single(q: crossbeam_queue::ArrayQueue<u64>) -> u64 {
    let mut sum = 0u64;
    for i in 0..N as u64 {
        q.push(black_box(i)).unwrap();
        sum = sum.wrapping_add(q.pop().unwrap());
    }
    sum
}

burst!(
    rtrb_burst32,
    rtrb_ring: Rtrb,
    32,
    u64,
    1,
    |tx, s| tx
        .write_chunk_uninit(32)
        .unwrap()
        .fill_from_iter(s.iter().copied()),
    |rx, d| {
        let c = rx.read_chunk(32).unwrap();
        let (a, b) = c.as_slices();
        d[..a.len()].copy_from_slice(a);
        d[a.len()..].copy_from_slice(b);
        c.commit_all();
        32
    }
);

library_benchmark_group!(
    name = rings;
    benchmarks = rtrb_single, crossbeam_single, rtrb_burst32
);

main!(library_benchmark_groups = rings);
