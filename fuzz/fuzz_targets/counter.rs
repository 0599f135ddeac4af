//! Fuzz target: handle / group bookkeeping of the sharded counters against a model
//! (per-slot handles, totals, shard exhaustion, reset).
#![no_main]

use std::sync::Arc;

use flowline::counter::{CounterGroup, ShardedCounter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&shards, ops)) = data.split_first() else { return };
    let shards = usize::from(shards % 4) + 1;
    let c = Arc::new(ShardedCounter::new(shards));
    let g = Arc::new(CounterGroup::new(["pkts", "bytes", "drops"], shards));
    let mut hs: Vec<Option<_>> = (0..8).map(|_| None).collect();
    let mut ghs: Vec<Option<_>> = (0..8).map(|_| None).collect();
    let mut live = 0usize;
    let mut glive = 0usize;
    let mut total = 0u64;
    let mut gtotal = [0u64; 3];
    for &b in ops {
        let slot = usize::from(b >> 5);
        let n = u64::from(b & 0x1f);
        match b % 7 {
            0 => {
                if hs[slot].is_none() {
                    match c.try_handle() {
                        Ok(h) => {
                            assert!(live < shards);
                            hs[slot] = Some(h);
                            live += 1;
                        }
                        Err(e) => {
                            assert_eq!(live, shards);
                            assert_eq!(e.shards(), shards);
                        }
                    }
                }
            }
            1 => {
                if let Some(h) = hs[slot].as_mut() {
                    h.add(n);
                    total += n;
                }
            }
            2 => {
                if hs[slot].take().is_some() {
                    live -= 1;
                }
            }
            3 => {
                c.add(n);
                total += n;
            }
            4 => {
                c.reset();
                total = 0;
            }
            5 => {
                if ghs[slot].is_none() {
                    if let Ok(h) = g.try_handle() {
                        ghs[slot] = Some(h);
                        glive += 1;
                    } else {
                        assert_eq!(glive, shards);
                    }
                } else if b & 1 == 0 {
                    ghs[slot] = None;
                    glive -= 1;
                }
            }
            _ => {
                if let Some(h) = ghs[slot].as_mut() {
                    let i = (n % 3) as usize;
                    h.add(i, n);
                    gtotal[i] += n;
                    h.add_all([1, n, 0]);
                    gtotal[0] += 1;
                    gtotal[1] += n;
                }
            }
        }
        assert_eq!(c.sum(), total);
        assert_eq!(*g.snapshot().values(), gtotal);
    }
});
