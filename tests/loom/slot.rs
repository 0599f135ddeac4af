//! loom models of the slot protocols: post/wait handshakes between two threads.
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom -- slot::`.
#![cfg(loom)]

use std::time::Duration;

use flowline::slot::{Signal, Slot, SlotLine};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

const READY: u8 = 1;

/// The writer fills a buffer word, then posts READY with a count; the waiter that sees READY
/// must see the buffer and the count.
#[test]
fn post_then_wait_publishes_data() {
    loom::model(|| {
        let data = Arc::new(AtomicU64::new(0));
        let slot = Arc::new(Slot::new(0));
        let t = {
            let (data, slot) = (Arc::clone(&data), Arc::clone(&slot));
            thread::spawn(move || {
                data.store(99, Ordering::Relaxed);
                slot.post_signal(Signal::pack(READY, 3).unwrap());
            })
        };
        let s = slot.wait_for_flags(READY, Duration::MAX).unwrap();
        assert_eq!(s.payload(), 3);
        assert_eq!(data.load(Ordering::Relaxed), 99);
        t.join().unwrap();
    });
}

/// Two rounds of request/response over two slots (each with one writer), with the
/// responder counting completions through `update`: every response matches its request and
/// the completion count is exact.
#[test]
fn ping_pong_with_update_counts_exactly() {
    loom::model(|| {
        let req = Arc::new(Slot::new(0)); // writer: main
        let done = Arc::new(Slot::new(0)); // writer: responder
        let t = {
            let (req, done) = (Arc::clone(&req), Arc::clone(&done));
            thread::spawn(move || {
                for round in 1..=2u64 {
                    let r = req.wait_until(|w| w == round, Duration::MAX).unwrap();
                    assert_eq!(r, round);
                    done.update(|n| n + 1);
                }
            })
        };
        for round in 1..=2u64 {
            req.post(round);
            done.wait_for_word(round, Duration::MAX).unwrap();
        }
        t.join().unwrap();
        assert_eq!(done.load(), 2);
    });
}

/// Words of one line with different writers do not interfere: each reader sees its own
/// word's value only, and the data published before it.
#[test]
fn slot_line_words_have_independent_writers() {
    loom::model(|| {
        let line = Arc::new(SlotLine::new());
        let data = Arc::new(AtomicU64::new(0));
        let t = {
            let (line, data) = (Arc::clone(&line), Arc::clone(&data));
            thread::spawn(move || {
                data.store(5, Ordering::Relaxed);
                line.post(1, 10); // word 1: this thread's
                line.wait_until(0, |w| w == 20, Duration::MAX).unwrap();
            })
        };
        line.post(0, 20); // word 0: main's
        line.wait_until(1, |w| w == 10, Duration::MAX).unwrap();
        assert_eq!(data.load(Ordering::Relaxed), 5);
        t.join().unwrap();
        assert_eq!((line.load(0), line.load(1)), (20, 10));
    });
}
