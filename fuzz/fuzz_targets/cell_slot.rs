//! Fuzz target: op sequences over assign-unless-equal cells, signal packing and a slot line,
//! each checked against a plain model.
#![no_main]

use core::sync::atomic::{AtomicU16, AtomicU64, Ordering};

use flowline::cell::{assign_unless_equal, AssignUnlessEqual};
use flowline::slot::{Signal, SlotLine, MAX_PAYLOAD, WORDS_PER_LINE};
use libfuzzer_sys::fuzz_target;

fn word(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    let a16 = AtomicU16::new(0);
    let a64 = AtomicU64::new(0);
    let mut plain = 0u64;
    let mut m16 = 0u16;
    let mut m64 = 0u64;
    let line = SlotLine::new();
    let mut mline = [0u64; WORDS_PER_LINE];

    let mut rest = data;
    while let Some((&op, tail)) = rest.split_first() {
        let arg = word(tail);
        rest = &tail[tail.len().min(8)..];
        match op % 5 {
            0 => {
                let v = (arg % 4) as u16;
                assert_eq!(a16.assign_unless_equal(v, Ordering::Release), m16 != v);
                m16 = v;
                assert_eq!(a16.load(Ordering::Relaxed), m16);
            }
            1 => {
                let v = arg % 3;
                assert_eq!(a64.assign_unless_equal(v, Ordering::SeqCst), m64 != v);
                assert_eq!(assign_unless_equal(&mut plain, v), m64 != v);
                m64 = v;
                assert_eq!((a64.load(Ordering::Relaxed), plain), (m64, m64));
            }
            2 => {
                let flags = (arg >> 56) as u8;
                let payload = arg.rotate_left(u32::from(op));
                match Signal::pack(flags, payload) {
                    Ok(s) => {
                        assert!(payload <= MAX_PAYLOAD);
                        assert_eq!((s.flags(), s.payload()), (flags, payload));
                        assert_eq!(Signal::from_word(s.word()), s);
                    }
                    Err(e) => {
                        assert!(payload > MAX_PAYLOAD);
                        assert_eq!(e.payload(), payload);
                    }
                }
            }
            3 => {
                let i = (op as usize / 5) % WORDS_PER_LINE;
                line.post(i, arg);
                mline[i] = arg;
            }
            _ => {
                let i = (op as usize / 5) % WORDS_PER_LINE;
                let got = line.update(i, |w| w.wrapping_mul(3).wrapping_add(arg));
                mline[i] = mline[i].wrapping_mul(3).wrapping_add(arg);
                assert_eq!(got, mline[i]);
            }
        }
        assert_eq!(line.load_all(), mline);
    }
});
