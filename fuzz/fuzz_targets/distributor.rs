//! Fuzz target: distributor/worker schedules decoded from the input, checked by the same
//! sequential model as `tests/props/distributor.rs`.
#![no_main]

#[path = "../../tests/support/dist_model.rs"]
mod dist_model;

use dist_model::{run, Op};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, rest)) = data.split_first() else { return };
    let workers = usize::from(cfg % 3) + 1;
    let credit = usize::from((cfg >> 2) % 4) + 1;
    // Batching from the top bits: 1 to 4 packets, held 0 to 3 calls.
    let mut ops = vec![Op::Batching(usize::from((cfg >> 4) & 3) + 1, u32::from(cfg >> 6))];
    let mut it = rest.chunks(2);
    while let Some(c) = it.next() {
        let (a, b) = (c[0], c.get(1).copied().unwrap_or(0));
        let w = usize::from(b % 5);
        ops.push(match a % 9 {
            0 | 1 => Op::Distribute((0..(b % 6)).map(|i| a.wrapping_mul(31).wrapping_add(i * 7)).collect()),
            2 => Op::Recv(w, usize::from(b >> 2) % 6),
            3 => Op::Done(w),
            4 => Op::Drop(w),
            5 => Op::Resched(w, b >> 2),
            6 => Op::Leave(w, usize::from(b >> 2) % 4),
            7 => Op::AnyOrder(w, usize::from(b >> 3), a >> 4, b >> 2),
            _ => match b & 0xc0 {
                0x00 => Op::Rejoin(w),
                0x40 => Op::Add,
                0x80 => Op::Remove(w),
                _ => Op::Collect,
            },
        });
    }
    if let Err(e) = run(workers, credit, &ops) {
        panic!("{e}");
    }
});
