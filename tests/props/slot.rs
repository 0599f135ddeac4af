//! Property tests: signal packing round-trips for every flag/payload in range, rejects
//! everything out of range, and slot-line operations agree with a plain array model.
//! (Needs `std`: the model also checks the timed waits.)
#![cfg(all(not(loom), feature = "std"))]

use std::time::Duration;

use flowline::slot::{Signal, Slot, SlotLine, MAX_PAYLOAD, PAYLOAD_BITS, WORDS_PER_LINE};
use proptest::prelude::*;

proptest! {
    #[test]
    fn pack_round_trips(flags in any::<u8>(), payload in 0..=MAX_PAYLOAD) {
        let s = Signal::pack(flags, payload).unwrap();
        prop_assert_eq!(s.flags(), flags);
        prop_assert_eq!(s.payload(), payload);
        prop_assert_eq!(Signal::from_word(s.word()), s);
        prop_assert_eq!(s.word(), ((flags as u64) << PAYLOAD_BITS) | payload);
        let slot = Slot::new(0);
        slot.post_signal(s);
        prop_assert_eq!(slot.load_signal(), s);
    }

    #[test]
    fn pack_rejects_out_of_range(flags in any::<u8>(), payload in (MAX_PAYLOAD + 1)..=u64::MAX) {
        let err = Signal::pack(flags, payload).unwrap_err();
        prop_assert_eq!(err.payload(), payload);
    }

    #[test]
    fn every_word_is_a_signal(word in any::<u64>()) {
        let s = Signal::from_word(word);
        prop_assert_eq!(Signal::pack(s.flags(), s.payload()).unwrap().word(), word);
    }

    #[test]
    fn has_flags_is_subset_test(flags in any::<u8>(), mask in any::<u8>()) {
        let s = Signal::pack(flags, 0).unwrap();
        prop_assert_eq!(s.has_flags(mask), flags & mask == mask);
    }

    #[test]
    fn slot_line_matches_array_model(
        ops in proptest::collection::vec((0..WORDS_PER_LINE, any::<u64>(), any::<bool>()), 0..64)
    ) {
        let line = SlotLine::new();
        let mut model = [0u64; WORDS_PER_LINE];
        for (i, v, is_update) in ops {
            if is_update {
                let got = line.update(i, |w| w.wrapping_add(v));
                model[i] = model[i].wrapping_add(v);
                prop_assert_eq!(got, model[i]);
            } else {
                line.post(i, v);
                model[i] = v;
            }
            prop_assert_eq!(line.load(i), model[i]);
            let want = model[i];
            prop_assert_eq!(line.wait_until(i, |w| w == want, Duration::ZERO), Ok(want));
        }
        prop_assert_eq!(line.load_all(), model);
    }
}
