//! Fuzz target: MPSC op sequences from three producer handles (pushes, bursts, chunks
//! committed in part or dropped) and the consumer (pops, peeks, bursts, bulk pops, read
//! chunks committed in part), against a model of runs in reservation
//! order; heap-owning items so a double drop or leak shows up.
#![no_main]

use std::collections::VecDeque;

use flowline::fifo::mpsc;
use libfuzzer_sys::fuzz_target;

/// (slots, items, taken)
type Run = (usize, Vec<u64>, usize);

fn ready(runs: &mut VecDeque<Run>, used: &mut usize) -> Option<u64> {
    while let Some((len, items, taken)) = runs.front() {
        if *taken < items.len() {
            return Some(items[*taken]);
        }
        *used -= len - taken;
        runs.pop_front();
    }
    None
}

fn take(runs: &mut VecDeque<Run>, used: &mut usize) -> Option<u64> {
    let v = ready(runs, used)?;
    runs.front_mut().unwrap().2 += 1;
    *used -= 1;
    Some(v)
}

/// Items published from the consumer's position, across holes, up to an unpublished run
/// (every run of this model is published).
fn available(runs: &mut VecDeque<Run>, used: &mut usize) -> usize {
    ready(runs, used);
    runs.iter().map(|(_, items, taken)| items.len() - taken).sum()
}

/// What a read chunk of up to `want` lends: contiguous slots, so it goes on into the next
/// run only after a run without holes.
fn contiguous(runs: &mut VecDeque<Run>, used: &mut usize, want: usize) -> Vec<u64> {
    let mut out = Vec::new();
    if ready(runs, used).is_none() {
        return out;
    }
    for (len, items, taken) in runs.iter() {
        out.extend(&items[*taken..]);
        if out.len() >= want || items.len() < *len {
            break;
        }
    }
    out.truncate(want);
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&cap, ops)) = data.split_first() else { return };
    let (tx, mut rx) = mpsc::channel::<Box<u64>>(usize::from(cap % 9) + 1).unwrap();
    let cap = tx.capacity();
    let mut txs = [tx.clone(), tx.clone(), tx];
    let mut runs: VecDeque<Run> = VecDeque::new();
    let mut used = 0usize;
    let mut next = 0u64;
    for &b in ops {
        let p = usize::from(b >> 6) % 3;
        let n = usize::from((b >> 3) & 0x7);
        match b & 0x7 {
            0 => {
                let ok = txs[p].push(Box::new(next)).is_ok();
                assert_eq!(ok, used < cap);
                if ok {
                    runs.push_back((1, vec![next], 0));
                    used += 1;
                }
                next += 1;
            }
            1 => {
                let mut it = (next..next + n as u64).map(Box::new);
                let k = txs[p].push_burst_iter(&mut it);
                assert_eq!(k, n.min(cap - used));
                if k > 0 {
                    runs.push_back((k, (next..next + k as u64).collect(), 0));
                    used += k;
                }
                next += n as u64;
            }
            2 => {
                let ok = txs[p].push_bulk_iter((0..n).map(|i| Box::new(next + i as u64))).is_ok();
                assert_eq!(ok, n <= cap - used);
                if ok && n > 0 {
                    runs.push_back((n, (next..next + n as u64).collect(), 0));
                    used += n;
                }
                next += n as u64;
            }
            3 | 4 => {
                let mut c = txs[p].write_chunk(n);
                let len = c.len();
                assert_eq!(len, n.min(cap - used));
                let k = if b & 0x7 == 3 { len / 2 } else { 0 };
                let (x, y) = c.as_mut_slices();
                for (i, s) in x.iter_mut().chain(y.iter_mut()).take(k).enumerate() {
                    s.write(Box::new(next + i as u64));
                }
                if b & 0x7 == 3 {
                    // SAFETY: the first k slots were written just above.
                    unsafe { c.commit(k) };
                } else {
                    drop(c); // published empty
                }
                if len > 0 {
                    runs.push_back((len, (next..next + k as u64).collect(), 0));
                    used += len;
                }
                next += k as u64;
            }
            5 => assert_eq!(rx.pop().map(|b| *b), take(&mut runs, &mut used)),
            6 if p == 0 => assert_eq!(rx.peek().map(|b| **b), ready(&mut runs, &mut used)),
            6 if p == 1 => {
                // Read chunk of up to n, commit half of it.
                let want = contiguous(&mut runs, &mut used, n);
                let c = rx.read_chunk(n);
                let (x, y) = c.as_slices();
                let got: Vec<u64> = x.iter().chain(y).map(|b| **b).collect();
                assert_eq!(got, want);
                let k = c.len() / 2;
                c.commit(k);
                for _ in 0..k {
                    take(&mut runs, &mut used);
                }
            }
            6 => {
                let mut v = Vec::new();
                let ok = rx.pop_bulk_into(&mut v, n);
                assert_eq!(ok, available(&mut runs, &mut used) >= n);
                assert_eq!(v.len(), if ok { n } else { 0 });
                for x in v {
                    assert_eq!(Some(*x), take(&mut runs, &mut used));
                }
            }
            _ => {
                let mut v = Vec::new();
                rx.pop_burst_into(&mut v, n);
                if n == 0 {
                    ready(&mut runs, &mut used);
                }
                let got = v.len();
                for x in v {
                    assert_eq!(Some(*x), take(&mut runs, &mut used));
                }
                if got < n {
                    // Fewer than asked only when nothing more was ready.
                    assert_eq!(ready(&mut runs, &mut used), None);
                }
            }
        }
        assert_eq!(rx.len(), used);
    }
});
