//! Fuzz target: `niche` ring op sequences from the input, against a `VecDeque` model, with
//! boxed items (so a double drop, a leak or a stale read shows up under the sanitizer) and
//! the `Copy` slice forms on a second ring of non-zero integers. The first byte picks the
//! capacity; the model is exact (nothing is published lazily).
#![no_main]

use std::collections::VecDeque;
use std::num::NonZeroU32;

use flowline::fifo::niche;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cap, ops)) = data.split_first() else { return };
    let (mut tx, mut rx) = niche::channel::<Box<u64>>(usize::from(cap % 9) + 1).unwrap();
    let (mut stx, mut srx) = niche::channel::<NonZeroU32>(usize::from(cap >> 4) + 1).unwrap();
    let cap = tx.capacity();
    let scap = stx.capacity();
    let mut model: VecDeque<u64> = VecDeque::new();
    let mut smodel: VecDeque<u32> = VecDeque::new();
    let mut next = 0u64;
    let mut snext = 1u32;
    for &b in ops {
        let n = usize::from(b >> 4);
        match b & 0xf {
            0 => {
                let ok = tx.push(Box::new(next)).is_ok();
                assert_eq!(ok, model.len() < cap);
                if ok {
                    model.push_back(next);
                    next += 1;
                }
            }
            1 => {
                let mut it = (0..n).map(|i| Box::new(next + i as u64));
                let k = tx.push_burst_iter(&mut it);
                assert_eq!(k, n.min(cap - model.len()));
                assert_eq!(it.len(), n - k);
                for _ in 0..k {
                    model.push_back(next);
                    next += 1;
                }
            }
            2 => {
                let items: Vec<Box<u64>> = (0..n as u64).map(|i| Box::new(next + i)).collect();
                let ok = tx.push_bulk_iter(items).is_ok();
                assert_eq!(ok, n <= cap - model.len());
                if ok {
                    for _ in 0..n {
                        model.push_back(next);
                        next += 1;
                    }
                }
            }
            3 => assert_eq!(rx.pop().map(|b| *b), model.pop_front()),
            4 => {
                let mut v = Vec::new();
                let k = rx.pop_burst_into(&mut v, n);
                assert_eq!(k, n.min(model.len()));
                for b in v {
                    assert_eq!(Some(*b), model.pop_front());
                }
            }
            5 => {
                let mut v = Vec::new();
                let ok = rx.pop_bulk_into(&mut v, n);
                assert_eq!(ok, n <= model.len());
                for b in v {
                    assert_eq!(Some(*b), model.pop_front());
                }
            }
            6 => {
                let mut ids = Vec::new();
                let k = rx.pop_burst_with(n, |b| ids.push(*b));
                assert_eq!(k, n.min(model.len()));
                assert!(ids.into_iter().eq(model.drain(..k)));
            }
            7 => {
                let items: Vec<NonZeroU32> =
                    (0..n as u32).map(|i| NonZeroU32::new(snext + i).unwrap()).collect();
                let k = stx.push_burst(&items);
                assert_eq!(k, n.min(scap - smodel.len()));
                for _ in 0..k {
                    smodel.push_back(snext);
                    snext += 1;
                }
            }
            8 => {
                let items: Vec<NonZeroU32> =
                    (0..n as u32).map(|i| NonZeroU32::new(snext + i).unwrap()).collect();
                let ok = stx.push_bulk(&items);
                assert_eq!(ok, n <= scap - smodel.len());
                if ok {
                    for _ in 0..n {
                        smodel.push_back(snext);
                        snext += 1;
                    }
                }
            }
            9 => {
                let mut out = vec![NonZeroU32::MAX; n];
                let k = srx.pop_burst(&mut out);
                assert_eq!(k, n.min(smodel.len()));
                assert!(out[..k].iter().map(|v| v.get()).eq(smodel.drain(..k)));
            }
            10 => {
                let mut out = vec![NonZeroU32::MAX; n];
                let ok = srx.pop_bulk(&mut out);
                assert_eq!(ok, n <= smodel.len());
                if ok {
                    assert!(out.iter().map(|v| v.get()).eq(smodel.drain(..n)));
                }
            }
            11 => assert_eq!(srx.pop().map(NonZeroU32::get), smodel.pop_front()),
            _ => {
                assert_eq!(rx.is_empty(), model.is_empty());
                assert_eq!(tx.is_full(), model.len() == cap);
                assert_eq!(srx.is_empty(), smodel.is_empty());
                assert_eq!(stx.is_full(), smodel.len() == scap);
            }
        }
    }
    // Leftovers are dropped with the ring (a leak or double free shows up here).
    if ops.len() % 2 == 0 {
        drop(tx);
        drop(rx);
    } else {
        drop(rx);
        drop(tx);
    }
});
