//! Fuzz target: pipeline/worker schedules decoded from the input, checked by the same
//! sequential model as `tests/props/pipeline.rs`.
#![no_main]

#[path = "../../tests/support/pipeline_model.rs"]
mod pipeline_model;

use flowline::distributor::StageType;
use libfuzzer_sys::fuzz_target;
use pipeline_model::{run, Op};

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, rest)) = data.split_first() else { return };
    let workers = usize::from(cfg % 3) + 1;
    let credit = usize::from((cfg >> 2) % 4) + 1;
    // One to three stages, their types from the top bits.
    let n = usize::from((cfg >> 4) % 3) + 1;
    let kinds = [StageType::Atomic, StageType::Ordered, StageType::Parallel];
    let stages: Vec<StageType> = (0..n)
        .map(|i| kinds[usize::from(cfg.rotate_right(i as u32 * 2) >> 6) % 3])
        .collect();
    let mut ops = Vec::new();
    let mut it = rest.chunks(2);
    while let Some(c) = it.next() {
        let (a, b) = (c[0], c.get(1).copied().unwrap_or(0));
        let w = usize::from(b % 4);
        ops.push(match a % 10 {
            0 | 1 => Op::Distribute((0..(b % 6)).map(|i| a.wrapping_mul(31).wrapping_add(i * 7)).collect()),
            2 | 3 => Op::Recv(w, usize::from(b >> 2) % 6),
            4 => Op::Done(w),
            5 => Op::Drop(w),
            6 => Op::Forward(w, b >> 2),
            7 => Op::ForwardAt(w, usize::from(b >> 3), a >> 4),
            8 => Op::Leave(w, usize::from(b >> 2) % 4),
            _ => match b & 0xc0 {
                0x00 if a & 0x10 == 0 => Op::Rejoin(w),
                0x00 => Op::Poison(w),
                0x40 => Op::Limit(usize::from(b & 0x0f)),
                0x80 if a & 0x10 == 0 => Op::Link(w, a >> 5),
                0x80 => Op::Priority(usize::from(b & 3), a >> 6),
                _ => Op::Collect,
            },
        });
    }
    if let Err(e) = run(workers, credit, &stages, &ops) {
        panic!("{e}");
    }
});
