//! Fuzz target: MPSC op sequences from three producer handles (pushes, bursts, chunks
//! committed in part or dropped) and the consumer (pops, peeks, bursts, bulk pops, read
//! chunks committed in part, `release_pending`), against a model of runs in reservation
//! order and of the slots single pops consumed without releasing them yet (lazy release:
//! the second input byte picks the release batch and whether the indices start just below
//! the wrap); heap-owning items so a double drop or leak shows up.
#![no_main]

use std::collections::VecDeque;

use flowline::fifo::mpsc;
use libfuzzer_sys::fuzz_target;

/// (slots, items, taken)
type Run = (usize, Vec<u64>, usize);

struct Model {
    runs: VecDeque<Run>,
    /// Slots reserved and not yet passed by the consumer.
    used: usize,
    /// Slots passed by single pops and not yet released to the producers.
    pending: usize,
    batch: usize,
}

impl Model {
    /// The consumer's `ready()`: passing a run's empty slots, or finding nothing, releases
    /// everything pending.
    fn ready(&mut self) -> Option<u64> {
        while let Some((len, items, taken)) = self.runs.front() {
            if *taken < items.len() {
                return Some(items[*taken]);
            }
            if len > taken {
                self.pending = 0;
            }
            self.used -= len - taken;
            self.runs.pop_front();
        }
        self.pending = 0;
        None
    }

    fn take(&mut self) -> Option<u64> {
        let v = self.ready()?;
        self.runs.front_mut().unwrap().2 += 1;
        self.used -= 1;
        Some(v)
    }

    /// A single pop: its slot is released with a full group.
    fn pop(&mut self) -> Option<u64> {
        let v = self.take()?;
        self.pending += 1;
        if self.pending >= self.batch {
            self.pending = 0;
        }
        Some(v)
    }

    /// Free slots as the producers see them.
    fn free(&self, cap: usize) -> usize {
        cap - self.used - self.pending
    }

    /// Items published from the consumer's position, across holes, up to an unpublished
    /// run (every run of this model is published).
    fn available(&mut self) -> usize {
        self.ready();
        self.runs
            .iter()
            .map(|(_, items, taken)| items.len() - taken)
            .sum()
    }

    /// What a read chunk of up to `want` lends: contiguous slots, so it goes on into the
    /// next run only after a run without holes.
    fn contiguous(&mut self, want: usize) -> Vec<u64> {
        let mut out = Vec::new();
        if self.ready().is_none() {
            return out;
        }
        for (len, items, taken) in self.runs.iter() {
            out.extend(&items[*taken..]);
            if out.len() >= want || items.len() < *len {
                break;
            }
        }
        out.truncate(want);
        out
    }

    fn reserve(&mut self, len: usize, items: Vec<u64>) {
        if len > 0 {
            self.runs.push_back((len, items, 0));
            self.used += len;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [cap, shape, ops @ ..] = data else { return };
    let start = if shape & 0x80 != 0 { u64::MAX - 7 } else { 0 };
    let batch = usize::from(shape & 0x7) + 1;
    let (tx, mut rx) =
        mpsc::with_release_batch::<Box<u64>>(usize::from(cap % 9) + 1, start, batch).unwrap();
    let cap = tx.capacity();
    let mut txs = [tx.clone(), tx.clone(), tx];
    let mut m = Model {
        runs: VecDeque::new(),
        used: 0,
        pending: 0,
        batch: batch.min(cap),
    };
    let mut next = 0u64;
    for &b in ops {
        let p = usize::from(b >> 6) % 3;
        let n = usize::from((b >> 3) & 0x7);
        match b & 0x7 {
            0 => {
                let ok = txs[p].push(Box::new(next)).is_ok();
                assert_eq!(ok, m.free(cap) > 0);
                if ok {
                    m.reserve(1, vec![next]);
                }
                next += 1;
            }
            1 => {
                let mut it = (next..next + n as u64).map(Box::new);
                let k = txs[p].push_burst_iter(&mut it);
                assert_eq!(k, n.min(m.free(cap)));
                m.reserve(k, (next..next + k as u64).collect());
                next += n as u64;
            }
            2 => {
                let ok = txs[p]
                    .push_bulk_iter((0..n).map(|i| Box::new(next + i as u64)))
                    .is_ok();
                assert_eq!(ok, n <= m.free(cap));
                if ok {
                    m.reserve(n, (next..next + n as u64).collect());
                }
                next += n as u64;
            }
            3 | 4 => {
                let mut c = txs[p].write_chunk(n);
                let len = c.len();
                assert_eq!(len, n.min(m.free(cap)));
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
                m.reserve(len, (next..next + k as u64).collect());
                next += k as u64;
            }
            5 if n == 7 => {
                rx.release_pending();
                m.pending = 0;
            }
            5 => assert_eq!(rx.pop().map(|b| *b), m.pop()),
            6 if p == 0 => assert_eq!(rx.peek().map(|b| **b), m.ready()),
            6 if p == 1 => {
                // Read chunk of up to n, commit half of it (a commit always releases).
                let want = m.contiguous(n);
                let c = rx.read_chunk(n);
                let (x, y) = c.as_slices();
                let got: Vec<u64> = x.iter().chain(y).map(|b| **b).collect();
                assert_eq!(got, want);
                let k = c.len() / 2;
                c.commit(k);
                for _ in 0..k {
                    m.take();
                }
                m.pending = 0;
            }
            6 => {
                let mut v = Vec::new();
                let ok = rx.pop_bulk_into(&mut v, n);
                assert_eq!(ok, m.available() >= n);
                if !ok {
                    m.pending = 0; // short: found nothing more, released
                }
                assert_eq!(v.len(), if ok { n } else { 0 });
                if !v.is_empty() {
                    m.pending = 0;
                }
                for x in v {
                    assert_eq!(Some(*x), m.take());
                }
            }
            _ => {
                let mut v = Vec::new();
                rx.pop_burst_into(&mut v, n);
                if n == 0 {
                    m.ready();
                }
                let got = v.len();
                for x in v {
                    assert_eq!(Some(*x), m.take());
                }
                if got < n {
                    // Fewer than asked only when nothing more was ready.
                    assert_eq!(m.ready(), None);
                }
                if got > 0 {
                    m.pending = 0;
                }
            }
        }
        assert_eq!(rx.len(), m.used);
        assert_eq!(txs[0].free(), m.free(cap));
    }
});
