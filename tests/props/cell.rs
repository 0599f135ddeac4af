//! Property tests: assign-unless-equal on atomics and plain places agrees with a model
//! ("wrote" is exactly "the value differed"; the value after is the one assigned) over random
//! operation sequences.

#![cfg(not(loom))]

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicU8, Ordering};

use flowline::cell::{assign_unless_equal, assign_unless_equal_volatile, AssignUnlessEqual};
use proptest::prelude::*;

fn store_order() -> impl Strategy<Value = Ordering> {
    prop_oneof![
        Just(Ordering::Relaxed),
        Just(Ordering::Release),
        Just(Ordering::SeqCst)
    ]
}

proptest! {
    // Values from a small domain so that "unchanged" is frequent.
    #[test]
    fn atomics_match_model(ops in proptest::collection::vec((0u8..4, store_order()), 0..200)) {
        let a8 = AtomicU8::new(0);
        let a64 = AtomicU64::new(0);
        let ai = AtomicI32::new(0);
        let ab = AtomicBool::new(false);
        let mut slots = [0u32; 4];
        let base = slots.as_mut_ptr();
        let ap = AtomicPtr::new(base);
        let mut model: u8 = 0;
        for (v, order) in ops {
            let expect = model != v;
            prop_assert_eq!(a8.assign_unless_equal(v, order), expect);
            prop_assert_eq!(a64.assign_unless_equal(u64::from(v) << 40, order), expect);
            prop_assert_eq!(ai.assign_unless_equal(-i32::from(v), order), expect);
            prop_assert_eq!(ab.assign_unless_equal(v % 2 == 1, order), (model % 2 == 1) != (v % 2 == 1));
            // wrapping_add keeps the pointer arithmetic free of unsafe; it stays in `slots`.
            prop_assert_eq!(ap.assign_unless_equal(base.wrapping_add(usize::from(v)), order), expect);
            model = v;
            prop_assert_eq!(a8.load(Ordering::Relaxed), model);
            prop_assert_eq!(a64.load(Ordering::Relaxed), u64::from(model) << 40);
        }
    }

    #[test]
    fn plain_and_volatile_forms_match_model(ops in proptest::collection::vec(0u16..3, 0..200)) {
        let mut place: u16 = 0;
        let mut shared: u16 = 0;
        let mut model: u16 = 0;
        for v in ops {
            let expect = model != v;
            prop_assert_eq!(assign_unless_equal(&mut place, v), expect);
            let p: *mut u16 = &mut shared;
            // SAFETY: `p` points to a live, aligned, initialised u16 with no reference alive
            // across the call.
            let wrote = unsafe { assign_unless_equal_volatile(p, v) };
            prop_assert_eq!(wrote, expect);
            model = v;
            prop_assert_eq!(place, model);
            prop_assert_eq!(shared, model);
        }
    }
}
