//! Unit tests of the signalling slots: packing, waits and layouts.

// The crate may be `no_std`; the tests use the standard library's prelude.
use super::*;
#[allow(unused_imports)]
use std::sync::Arc;
#[allow(unused_imports)]
use std::{borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec};

#[test]
fn pack_round_trips_edges() {
    for &(f, p) in &[
        (0u8, 0u64),
        (0xff, MAX_PAYLOAD),
        (0x80, 1),
        (1, MAX_PAYLOAD - 1),
    ] {
        let s = Signal::pack(f, p).unwrap();
        assert_eq!((s.flags(), s.payload()), (f, p));
    }
}

#[test]
fn pack_rejects_oversized_payload() {
    for p in [MAX_PAYLOAD + 1, u64::MAX, 1 << 63] {
        assert_eq!(Signal::pack(0, p), Err(PackError { payload: p }));
    }
}

#[test]
fn update_accumulates_and_returns_new() {
    let s = Slot::new(10);
    assert_eq!(s.update(|w| w * 2), 20);
    assert_eq!(s.load(), 20);
}

#[cfg(feature = "std")]
#[test]
fn wait_times_out_with_last_word() {
    let s = Slot::new(Signal::pack(0b01, 3).unwrap().word());
    let err = s
        .wait_for_flags(0b10, Duration::from_millis(2))
        .unwrap_err();
    assert_eq!(Signal::from_word(err.last_word()).payload(), 3);
    assert!(err.to_string().contains("timed out"));
}

#[cfg(feature = "std")]
#[test]
fn zero_timeout_still_sees_a_ready_word() {
    let s = Slot::new(1);
    assert_eq!(s.wait_until(|w| w == 1, Duration::ZERO), Ok(1));
}

#[cfg(feature = "std")]
#[test]
fn huge_timeout_does_not_overflow() {
    let s = Slot::new(1);
    let limit = Duration::from_secs(u64::MAX);
    assert_eq!(s.wait_until(|w| w == 1, limit), Ok(1));
}

#[cfg(feature = "std")]
#[test]
fn handshake_between_threads_carries_data() {
    // The worker publishes a payload in a separate word, then posts its slot; the reader
    // that sees the post must see the payload (Release/Acquire). Each slot has one
    // writer: `ping` is the main thread's, `pong` the worker's.
    let data = Arc::new(AtomicU64::new(0));
    let ping = Arc::new(Slot::new(0));
    let pong = Arc::new(Slot::new(0));
    let rounds = if cfg!(miri) { 20 } else { 2000 };
    let t = {
        let (data, ping, pong) = (Arc::clone(&data), Arc::clone(&ping), Arc::clone(&pong));
        std::thread::spawn(move || {
            for i in 1..=rounds {
                ping.wait_for_word(i, Duration::MAX).unwrap();
                data.store(i * 7, Ordering::Relaxed);
                pong.post(i);
            }
        })
    };
    for i in 1..=rounds {
        ping.post(i);
        pong.wait_for_word(i, Duration::MAX).unwrap();
        assert_eq!(data.load(Ordering::Relaxed), i * 7);
    }
    t.join().unwrap();
}

#[cfg(feature = "std")]
#[test]
fn slot_line_words_are_independent() {
    let line = SlotLine::new();
    for i in 0..WORDS_PER_LINE {
        line.post(i, i as u64 * 3);
    }
    let all = line.load_all();
    for (i, &w) in all.iter().enumerate() {
        assert_eq!(w, i as u64 * 3);
        assert_eq!(line.load(i), w);
    }
    assert_eq!(line.update(0, |w| w + 1), 1);
    assert!(line
        .wait_until(1, |w| w == 99, Duration::from_millis(1))
        .is_err());
}

#[test]
#[should_panic(expected = "out of range")]
fn slot_line_index_out_of_range_panics_with_message() {
    SlotLine::new().post(WORDS_PER_LINE, 1);
}

#[test]
fn debug_shows_flags_and_payload() {
    let s = Slot::new(Signal::pack(0b11, 42).unwrap().word());
    let text = format!("{s:?}");
    assert!(text.contains("0b00000011") && text.contains("42"), "{text}");
}
