//! Unit tests of the async registrations: counts, wakes, and wakers that panic.

use super::*;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

struct Count(AtomicUsize);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The sleeper count that publishers check follows the registrations exactly: up on
/// registration, unchanged on a refresh, down on withdrawal, on a wake (which consumes
/// every registration), and when the re-check finds the operation ready.
#[test]
fn registrations_keep_the_sleeper_count_exact() {
    register();
    let s = Sleepers::new();
    let c = Arc::new(Count(AtomicUsize::new(0)));
    let w = Waker::from(c.clone());
    let (mut a, mut b) = (None, None);
    assert!(!s.register_waker(&mut a, &w, || false));
    assert!(!s.register_waker(&mut a, &w, || false), "a refresh");
    assert!(!s.register_waker(&mut b, &w, || false));
    assert_eq!(s.count(), 2);
    s.deregister(&mut b);
    assert_eq!((s.count(), b), (1, None));
    s.notify();
    assert_eq!(c.0.load(Ordering::SeqCst), 1);
    assert_eq!(s.count(), 0, "the wake consumed it");
    // `a` still holds its old key, which the wake consumed: registering again counts
    // again, and withdrawing the stale key changes nothing.
    assert!(!s.register_waker(&mut a, &w, || false));
    assert_eq!(s.count(), 1);
    let mut stale = Some(u64::MAX);
    s.deregister(&mut stale);
    assert_eq!(s.count(), 1);
    s.deregister(&mut a);
    // Ready at the re-check: nothing stays registered.
    assert!(s.register_waker(&mut a, &w, || true));
    assert_eq!((s.count(), a), (0, None));
    s.notify();
    assert_eq!(
        c.0.load(Ordering::SeqCst),
        1,
        "nobody registered, nobody woken"
    );
}
/// A waker that panics in `wake` (`on_wake`) or in `clone`.
fn bad_waker(on_wake: bool) -> Waker {
    use std::task::{RawWaker, RawWakerVTable};
    static WAKE_PANICS: RawWakerVTable = RawWakerVTable::new(
        |p| RawWaker::new(p, &WAKE_PANICS),
        |_| panic!("waker panics in wake"),
        |_| panic!("waker panics in wake_by_ref"),
        |_| {},
    );
    static CLONE_PANICS: RawWakerVTable =
        RawWakerVTable::new(|_| panic!("waker panics in clone"), |_| {}, |_| {}, |_| {});
    let vtable = if on_wake { &WAKE_PANICS } else { &CLONE_PANICS };
    // SAFETY: the vtables never dereference the data pointer, and `clone` returns a
    // waker with the same (valid) vtable.
    unsafe { Waker::from_raw(RawWaker::new(core::ptr::null(), vtable)) }
}

/// Wakers that panic (two of three here) are contained: the publication returns, the
/// other registrations are woken and the count stays exact; one whose clone panics
/// (before anything is registered) leaves nothing counted.
#[test]
fn panicking_wakers_lose_no_other_wake_and_no_count() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    register();
    let s = Sleepers::new();
    let c = Arc::new(Count(AtomicUsize::new(0)));
    let good = Waker::from(c.clone());
    let bad = bad_waker(true);
    // Two panicking wakers around a good one: one panic comes out (no abort from a
    // second panic during the first's unwinding), and the good one is woken.
    let (mut a, mut b, mut d) = (None, None, None);
    assert!(!s.register_waker(&mut a, &bad, || false));
    assert!(!s.register_waker(&mut b, &good, || false));
    assert!(!s.register_waker(&mut d, &bad, || false));
    assert_eq!(s.count(), 3);
    let before = waker_panics();
    // Contained: the publication that ran them completes, and both panics are counted.
    s.notify();
    assert!(waker_panics() - before >= 2);
    assert_eq!(
        c.0.load(Ordering::SeqCst),
        1,
        "woken despite the others' panics"
    );
    assert_eq!(s.count(), 0);
    let clone_panics = bad_waker(false);
    let mut k = None;
    let r = catch_unwind(AssertUnwindSafe(|| {
        s.register_waker(&mut k, &clone_panics, || false)
    }));
    assert!(r.is_err());
    assert_eq!((s.count(), k), (0, None));
    // Registrations still work afterwards.
    assert!(!s.register_waker(&mut k, &good, || false));
    s.notify();
    assert_eq!(c.0.load(Ordering::SeqCst), 2);
}

/// A waker whose `drop` panics: the drop that follows a poll which took its item (the
/// poll withdraws its registration, which a racing wake had not consumed yet) is
/// contained, and the item comes out of the poll (it was dropped with the unwinding).
#[test]
fn a_waker_dropped_after_the_poll_took_its_item_loses_nothing() {
    use std::task::{RawWaker, RawWakerVTable};
    static DROP_PANICS: RawWakerVTable = RawWakerVTable::new(
        |p| RawWaker::new(p, &DROP_PANICS),
        |_| {},
        |_| {},
        |_| panic!("waker panics in drop"),
    );
    register();
    struct H {
        s: Sleepers,
        item: Option<Box<u64>>,
        coop: Coop,
    }
    let mut h = H {
        s: Sleepers::new(),
        item: None,
        coop: Coop::new(),
    };
    let mut key = None;
    let mut yielded = 0;
    let strategy = WaitStrategy::SpinPark {
        spins: 0,
        yields: 0,
    };
    let poll = |h: &mut H, key: &mut Option<u64>, yielded: &mut u32, cx: &mut Context<'_>| {
        poll_async(
            h,
            key,
            yielded,
            strategy,
            cx,
            |h| h.item.take().map_or(Step::Pending, Step::Ready),
            |h| h.item.is_some(),
            |h| &h.s,
            |h| &mut h.coop,
        )
    };
    // Never dropped itself (its drop panics): only the clones the ring keeps are.
    // SAFETY: the vtable never dereferences the data pointer.
    let bad = core::mem::ManuallyDrop::new(unsafe {
        Waker::from_raw(RawWaker::new(core::ptr::null(), &DROP_PANICS))
    });
    let mut cx = Context::from_waker(&bad);
    assert!(poll(&mut h, &mut key, &mut yielded, &mut cx).is_pending());
    assert_eq!(h.s.count(), 1, "registered");
    // The item arrives and the task polls before any wake consumed its registration.
    h.item = Some(Box::new(7));
    let before = waker_panics();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        poll(&mut h, &mut key, &mut yielded, &mut cx)
    }));
    match r {
        Ok(core::task::Poll::Ready(Ok(v))) => assert_eq!(*v, 7),
        Ok(other) => panic!("expected the item, got {other:?}"),
        Err(_) => panic!("the waker's panic came out of the poll and took the item"),
    }
    assert!(waker_panics() > before, "the panic is counted");
    assert_eq!((h.s.count(), key), (0, None), "withdrawn");
}

/// A refresh that replaces a registered waker and then finds the operation ready lets
/// go of two wakers at once: each drop is contained on its own, so two panicking
/// drops do not abort the process (the second would panic during the first's
/// unwinding).
#[test]
fn two_panicking_waker_drops_in_one_call_are_contained_apart() {
    use std::task::{RawWaker, RawWakerVTable};
    // Two vtables, so the wakers do not `will_wake` each other.
    static A: RawWakerVTable = RawWakerVTable::new(
        |p| RawWaker::new(p, &A),
        |_| {},
        |_| {},
        |_| panic!("waker panics in drop"),
    );
    static B: RawWakerVTable = RawWakerVTable::new(
        |p| RawWaker::new(p, &B),
        |_| {},
        |_| {},
        |_| panic!("waker panics in drop"),
    );
    register();
    let s = Sleepers::new();
    // SAFETY: the vtables never dereference the data pointer; the originals are never
    // dropped (their drop panics), only the clones the sleepers keep.
    let (a, b) = unsafe {
        (
            core::mem::ManuallyDrop::new(Waker::from_raw(RawWaker::new(core::ptr::null(), &A))),
            core::mem::ManuallyDrop::new(Waker::from_raw(RawWaker::new(core::ptr::null(), &B))),
        )
    };
    let mut key = None;
    assert!(!s.register_waker(&mut key, &a, || false));
    let before = waker_panics();
    assert!(
        s.register_waker(&mut key, &b, || true),
        "ready at the re-check"
    );
    assert!(
        waker_panics() - before >= 2,
        "both drops ran and were contained"
    );
    assert_eq!((s.count(), key), (0, None));
}

/// A waker this crate lets go of is dropped with no lock held, so a waker whose drop
/// touches the same ring (here: takes its sleepers' mutex) runs: a refresh that finds
/// the operation ready drops both the replaced waker and the refreshed one.
#[test]
fn wakers_are_dropped_with_no_lock_held() {
    use std::sync::atomic::AtomicBool;
    register();
    struct Probe {
        s: Arc<Sleepers>,
        lock_was_free: Arc<AtomicBool>,
    }
    impl Wake for Probe {
        fn wake(self: Arc<Self>) {}
    }
    impl Drop for Probe {
        fn drop(&mut self) {
            let free = self.s.lock.try_lock().is_ok();
            self.lock_was_free.store(free, Ordering::SeqCst);
        }
    }
    let s = Arc::new(Sleepers::new());
    let free_a = Arc::new(AtomicBool::new(false));
    let a = Waker::from(Arc::new(Probe {
        s: s.clone(),
        lock_was_free: free_a.clone(),
    }));
    let (_c, b) = {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    };
    let mut key = None;
    assert!(!s.register_waker(&mut key, &a, || false));
    // The last handle on `a`'s probe is now the registration's clone.
    drop(a);
    assert!(
        s.register_waker(&mut key, &b, || true),
        "ready at the re-check"
    );
    assert!(free_a.load(Ordering::SeqCst), "dropped with the mutex held");
    assert_eq!((s.count(), key), (0, None));
}
