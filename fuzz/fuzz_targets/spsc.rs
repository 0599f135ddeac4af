//! Fuzz target: SPSC ring op sequences from the input, against a `VecDeque` model, with
//! heap-owning items so that a double drop, a leak or a stale read shows up.
#![no_main]

use std::collections::VecDeque;

use flowline::fifo::spsc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cap, ops)) = data.split_first() else { return };
    let (mut tx, mut rx) = spsc::channel::<Box<u64>>(usize::from(cap % 9) + 1).unwrap();
    let cap = tx.capacity();
    let mut model: VecDeque<u64> = VecDeque::new();
    let mut next = 0u64;
    for &b in ops {
        let n = usize::from(b >> 4);
        match b & 0x7 {
            0 => {
                let ok = tx.push(Box::new(next)).is_ok();
                assert_eq!(ok, model.len() < cap);
                if ok {
                    model.push_back(next);
                    next += 1;
                }
            }
            1 => {
                let mut it = (next..next + n as u64).map(Box::new);
                let k = tx.push_burst_iter(&mut it);
                assert_eq!(k, n.min(cap - model.len()));
                assert_eq!(it.next().map(|b| *b), (k < n).then_some(next + k as u64));
                for _ in 0..k {
                    model.push_back(next);
                    next += 1;
                }
            }
            2 => {
                let items: Vec<Box<u64>> = (next..next + n as u64).map(Box::new).collect();
                let ok = tx.push_bulk_iter(items).is_ok();
                assert_eq!(ok, n <= cap - model.len());
                if ok {
                    for _ in 0..n {
                        model.push_back(next);
                        next += 1;
                    }
                }
            }
            3 => {
                let mut c = tx.write_chunk(n);
                let k = c.len();
                assert_eq!(k, n.min(cap - model.len()));
                let (a, bb) = c.as_mut_slices();
                for (i, s) in a.iter_mut().chain(bb.iter_mut()).enumerate() {
                    s.write(Box::new(next + i as u64));
                }
                // SAFETY: all k reserved slots were written just above.
                unsafe { c.commit(k) };
                for _ in 0..k {
                    model.push_back(next);
                    next += 1;
                }
            }
            4 => assert_eq!(rx.pop().map(|b| *b), model.pop_front()),
            5 => assert_eq!(rx.peek().map(|b| **b), model.front().copied()),
            6 => {
                let mut v = Vec::new();
                let k = rx.pop_burst_into(&mut v, n);
                assert_eq!(k, n.min(model.len()));
                for x in v {
                    assert_eq!(Some(*x), model.pop_front());
                }
            }
            _ => {
                let c = rx.read_chunk(n);
                let len = c.len();
                let (a, bb) = c.as_slices();
                assert!(a.iter().chain(bb).map(|b| **b).eq(model.iter().take(len).copied()));
                let k = len / 2 + usize::from(b & 0x8 != 0) * (len - len / 2);
                c.commit(k);
                for _ in 0..k {
                    model.pop_front();
                }
            }
        }
        assert_eq!((tx.len(), rx.len()), (model.len(), model.len()));
    }
});
