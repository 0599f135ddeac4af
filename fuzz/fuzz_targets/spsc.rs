//! Fuzz target: SPSC ring op sequences from the input, against a `VecDeque` model, with
//! heap-owning items so that a double drop, a leak or a stale read shows up. The first
//! byte picks the capacity and the single-pop release batch (pushes come singly, as
//! bursts from an iterator or from a `Vec`, and as bulk); the model tracks slots popped
//! and not yet released, and the consumer's cached view of the producer's index.
#![no_main]

use std::collections::VecDeque;

use flowline::fifo::spsc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cap, ops)) = data.split_first() else {
        return;
    };
    let batch = usize::from(cap >> 4) + 1;
    let (mut tx, mut rx) =
        spsc::with_release_batch::<Box<u64>>(usize::from(cap % 9) + 1, 0, batch).unwrap();
    let cap = tx.capacity();
    let batch = batch.min(cap);
    let mut model: VecDeque<u64> = VecDeque::new();
    let mut next = 0u64;
    let mut pending = 0usize;
    let mut cached = 0usize;
    // The consumer looks for `want` items: its cached view, or (after releasing what single
    // pops left pending) a fresh one.
    let avail = |want: usize, cached: &mut usize, pending: &mut usize, len: usize| {
        if *cached < want {
            *pending = 0;
            *cached = len;
        }
        *cached
    };
    for &b in ops {
        let n = usize::from(b >> 4);
        match b & 0x7 {
            0 => {
                let ok = tx.push(Box::new(next)).is_ok();
                assert_eq!(ok, model.len() + pending < cap);
                if ok {
                    model.push_back(next);
                    next += 1;
                }
            }
            1 if b & 0x8 != 0 => {
                // From a `Vec`, moved as bytes: what did not fit stays, in order.
                let mut v: Vec<Box<u64>> = (next..next + n as u64).map(Box::new).collect();
                let k = tx.push_burst_from(&mut v);
                assert_eq!(k, n.min(cap - model.len() - pending));
                assert!(v.iter().map(|b| **b).eq(next + k as u64..next + n as u64));
                for _ in 0..k {
                    model.push_back(next);
                    next += 1;
                }
            }
            1 => {
                let mut it = (next..next + n as u64).map(Box::new);
                let k = tx.push_burst_iter(&mut it);
                assert_eq!(k, n.min(cap - model.len() - pending));
                assert_eq!(it.next().map(|b| *b), (k < n).then_some(next + k as u64));
                for _ in 0..k {
                    model.push_back(next);
                    next += 1;
                }
            }
            2 => {
                let items: Vec<Box<u64>> = (next..next + n as u64).map(Box::new).collect();
                let ok = tx.push_bulk_iter(items).is_ok();
                assert_eq!(ok, n <= cap - model.len() - pending);
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
                assert_eq!(k, n.min(cap - model.len() - pending));
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
            4 => {
                let got = rx.pop().map(|b| *b);
                if avail(1, &mut cached, &mut pending, model.len()) > 0 {
                    assert_eq!(got, model.pop_front());
                    cached -= 1;
                    pending += 1;
                    if pending >= batch || cached == 0 {
                        pending = 0;
                    }
                } else {
                    assert_eq!(got, None);
                }
            }
            5 => {
                let got = rx.peek().map(|b| **b);
                let a = avail(1, &mut cached, &mut pending, model.len());
                assert_eq!(got, if a > 0 { model.front().copied() } else { None });
            }
            6 => {
                let mut v = Vec::new();
                let k = rx.pop_burst_into(&mut v, n);
                assert_eq!(k, n.min(avail(n, &mut cached, &mut pending, model.len())));
                cached -= k;
                pending = 0;
                for x in v {
                    assert_eq!(Some(*x), model.pop_front());
                }
            }
            _ => {
                let c = rx.read_chunk(n);
                let len = c.len();
                assert_eq!(len, n.min(avail(n, &mut cached, &mut pending, model.len())));
                let (a, bb) = c.as_slices();
                assert!(a
                    .iter()
                    .chain(bb)
                    .map(|b| **b)
                    .eq(model.iter().take(len).copied()));
                let k = len / 2 + usize::from(b & 0x8 != 0) * (len - len / 2);
                c.commit(k);
                cached -= k;
                pending = 0;
                for _ in 0..k {
                    model.pop_front();
                }
            }
        }
        assert_eq!((tx.len(), rx.len()), (model.len() + pending, model.len()));
    }
});
