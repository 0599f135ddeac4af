//! Fuzz target: ordered-distributor/worker schedules decoded from the input, checked by
//! the same sequential model as `tests/props/ordered.rs`.
#![no_main]

#[path = "../../tests/support/ordered_model.rs"]
mod ordered_model;

use libfuzzer_sys::fuzz_target;
use ordered_model::{run, Op};

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, rest)) = data.split_first() else {
        return;
    };
    let workers = usize::from(cfg % 3) + 1;
    let credit = usize::from((cfg >> 2) % 5) + 1;
    let window = usize::from(cfg >> 5) + 1;
    let mut ops = Vec::new();
    for c in rest.chunks(2) {
        let (a, b) = (c[0], c.get(1).copied().unwrap_or(0));
        let w = usize::from(b % 4);
        ops.push(match a % 10 {
            0 | 1 => Op::Distribute(b % 8),
            2 => Op::Recv(w, usize::from(b >> 2) % 6),
            3 => Op::Done(w),
            4 => Op::At(w, usize::from(b >> 2) % 6, a >> 4),
            5 => Op::Drop(w),
            6 => Op::Resched(w),
            7 if a & 0x80 != 0 => Op::LeaveThenWait(w, usize::from(b >> 2) % 4),
            7 => Op::Leave(w, usize::from(b >> 2) % 4),
            8 => match b >> 5 {
                0 => Op::Vanish(w),
                1 => Op::Rejoin(w),
                2 => Op::DistributeWait(b % 8),
                3 => Op::CollectWait,
                4 => Op::Flush,
                _ => Op::Collect,
            },
            _ => Op::Batching(usize::from(b % 6), u32::from(b >> 6)),
        });
    }
    if let Err(e) = run(workers, credit, window, &ops) {
        panic!("{e}");
    }
});
