//! Fuzz target: multi-node layout schedules (`distributor::nodes`) decoded from the input,
//! checked by the same model as `tests/proptest_nodes.rs`.
#![no_main]

#[path = "../../tests/support/nodes_model.rs"]
mod nodes_model;

use libfuzzer_sys::fuzz_target;
use nodes_model::{run, Op};

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, rest)) = data.split_first() else { return };
    let nodes = usize::from(cfg % 3) + 1;
    let workers = usize::from((cfg >> 2) % 2) + 1;
    let credit = usize::from((cfg >> 3) % 3) + 1;
    let bridge = usize::from((cfg >> 5) % 4) + 1;
    let mut ops = Vec::new();
    for c in rest.chunks(3) {
        let (a, b, d) = (c[0], c.get(1).copied().unwrap_or(0), c.get(2).copied().unwrap_or(0));
        let node = usize::from(b % 3);
        let w = usize::from((b >> 2) % 2);
        // No `Op::Panic`: libFuzzer aborts on any panic, caught or not.
        ops.push(match a % 14 {
            0 | 1 => Op::Input(node, (0..(d % 6)).map(|i| a.wrapping_mul(37).wrapping_add(i * 11)).collect()),
            2 | 3 => Op::Distribute(node),
            4 => Op::Recv(node, w, usize::from(d % 5)),
            5 | 6 => Op::Done(node, w, usize::from(d % 4)),
            7 => Op::Resched(node, w, d),
            8 => Op::Drop(node, w),
            9 => Op::Leave(node, w),
            10 => Op::Rejoin(node, w),
            11 => Op::Migrate(node, d, usize::from(d >> 4)),
            12 => Op::Flush(node),
            13 if d & 0x80 != 0 => Op::Batching(node, usize::from(d % 5), u32::from((d >> 3) % 4)),
            _ => Op::Collect(node),
        });
    }
    if let Err(e) = run(nodes, workers, credit, bridge, &ops) {
        panic!("{e}");
    }
});
