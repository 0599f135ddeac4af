//! Padded signalling slots: single-writer words on their own cache line.
//!
//! # Example
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use flowline::slot::{Signal, Slot};
//!
//! // A worker signals "burst of 32 done" on its own line.
//! const DONE: u8 = 1;
//! let done = Arc::new(Slot::new(0));
//! let d = Arc::clone(&done);
//! std::thread::spawn(move || d.post_signal(Signal::pack(DONE, 32).unwrap()));
//! let s = done.wait_for_flags(DONE, Duration::from_secs(5)).unwrap();
//! assert_eq!(s.payload(), 32);
//! # }
//! ```
//!
//! DPDK's distributor study found that moving packets through the per-worker buffers the
//! distributor and its workers share made the distributor miss the LLC on half its loads at
//! 16 cores: every packet pointer written into a shared line is a line the other side must
//! fetch. The fix is to let those shared lines only *signal* (a credit, a completion count,
//! a shutdown flag) and to move packets through rings whose lines are transferred once per
//! burst. A slot is such a signal: one 64-bit word alone on a line padded by
//! [`CachePadded`] (128 bytes on x86_64, where the adjacent-line prefetcher pairs lines),
//! written by one party and read by another.
//!
//! * [`Slot`]: one word. Its flags and payload travel together ([`Signal`]), so one line
//!   transfer carries both ("stop after count 1234" is one store, one miss).
//! * [`SlotLine`]: as many words as fill the padded unit ([`WORDS_PER_LINE`]), for signals
//!   that are read together (say, a group of credits a single writer hands out).
//!
//! # Single writer
//!
//! Each slot (and each word of a [`SlotLine`]) has **one writer**. The API cannot enforce it
//! (the word is atomic, so a second writer is not undefined behaviour), but the protocol
//! built on the slot relies on it: [`Slot::update`] is a load followed by a store, not a
//! read-modify-write, and loses updates if two parties write. Name the writer in the docs
//! of the structure that holds the slot.
//!
//! # Ordering
//!
//! Posts are `Release` stores and loads are `Acquire` loads, so whatever the writer wrote
//! before a post (a ring index, a buffer) is visible to a reader that observed the post.
//!
//! [`CachePadded`]: crossbeam_utils::CachePadded

use core::fmt;
use core::mem::{align_of, size_of};
#[cfg(feature = "std")]
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "std")]
use crate::sync::Backoff;

/// Bytes in the padded unit: `CachePadded`'s alignment for this target (128 on x86_64,
/// aarch64 and powerpc64; 64 on most others; 32 or 256 on a few).
///
/// ```
/// #[cfg(target_arch = "x86_64")]
/// assert_eq!(flowline::slot::LINE_BYTES, 128);
/// ```
pub const LINE_BYTES: usize = align_of::<CachePadded<u8>>();

/// How many `u64` words fill one padded unit: the length of a [`SlotLine`].
///
/// ```
/// use flowline::slot::{LINE_BYTES, WORDS_PER_LINE};
/// assert_eq!(WORDS_PER_LINE * 8, LINE_BYTES);
/// ```
pub const WORDS_PER_LINE: usize = LINE_BYTES / size_of::<u64>();

/// Bits of a [`Signal`] that hold the flags (the top bits of the word).
///
/// ```
/// assert_eq!(flowline::slot::FLAG_BITS, 8);
/// ```
pub const FLAG_BITS: u32 = 8;

/// Bits of a [`Signal`] that hold the payload (the low bits of the word).
///
/// ```
/// assert_eq!(flowline::slot::PAYLOAD_BITS, 56);
/// ```
pub const PAYLOAD_BITS: u32 = 64 - FLAG_BITS;

/// The largest payload a [`Signal`] can carry: `2^56 - 1`.
///
/// ```
/// use flowline::slot::{Signal, MAX_PAYLOAD};
/// assert!(Signal::pack(0, MAX_PAYLOAD).is_ok());
/// ```
pub const MAX_PAYLOAD: u64 = (1 << PAYLOAD_BITS) - 1;

/// A slot word split into 8 flag bits (top) and a 56-bit payload (bottom).
///
/// The flags say what the word means (ready, stop, error, ...); the payload carries a count,
/// an index or a credit. Packing is checked: a payload that does not fit is an error, never
/// silently truncated.
///
/// # Example
///
/// ```
/// use flowline::slot::Signal;
///
/// const STOP: u8 = 0b0000_0001;
/// let s = Signal::pack(STOP, 1234).unwrap();
/// assert_eq!(s.flags(), STOP);
/// assert_eq!(s.payload(), 1234);
/// assert_eq!(Signal::from_word(s.word()), s);
/// assert!(Signal::pack(0, 1 << 56).is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Signal(u64);

impl Signal {
    /// Packs `flags` and `payload` into one word.
    ///
    /// # Errors
    ///
    /// [`PackError`] if `payload` exceeds [`MAX_PAYLOAD`] (56 bits).
    ///
    /// ```
    /// use flowline::slot::Signal;
    /// assert_eq!(Signal::pack(1, 9).unwrap().payload(), 9);
    /// ```
    #[inline]
    pub const fn pack(flags: u8, payload: u64) -> Result<Signal, PackError> {
        if payload > MAX_PAYLOAD {
            return Err(PackError { payload });
        }
        Ok(Signal(((flags as u64) << PAYLOAD_BITS) | payload))
    }

    /// Reinterprets a raw slot word (every `u64` is a valid signal).
    ///
    /// ```
    /// use flowline::slot::Signal;
    /// assert_eq!(Signal::from_word(u64::MAX).flags(), 0xff);
    /// ```
    #[inline]
    #[must_use]
    pub const fn from_word(word: u64) -> Signal {
        Signal(word)
    }

    /// The raw word, as stored in a slot.
    ///
    /// ```
    /// use flowline::slot::Signal;
    /// assert_eq!(Signal::pack(1, 2).unwrap().word(), (1 << 56) | 2);
    /// ```
    #[inline]
    #[must_use]
    pub const fn word(self) -> u64 {
        self.0
    }

    /// The flag bits.
    ///
    /// ```
    /// use flowline::slot::Signal;
    /// assert_eq!(Signal::pack(0x80, 0).unwrap().flags(), 0x80);
    /// ```
    #[inline]
    #[must_use]
    pub const fn flags(self) -> u8 {
        (self.0 >> PAYLOAD_BITS) as u8
    }

    /// The payload bits.
    ///
    /// ```
    /// use flowline::slot::Signal;
    /// assert_eq!(Signal::pack(0xff, 42).unwrap().payload(), 42);
    /// ```
    #[inline]
    #[must_use]
    pub const fn payload(self) -> u64 {
        self.0 & MAX_PAYLOAD
    }

    /// Whether every bit of `mask` is set in the flags.
    ///
    /// ```
    /// use flowline::slot::Signal;
    /// let s = Signal::pack(0b101, 0).unwrap();
    /// assert!(s.has_flags(0b100));
    /// assert!(!s.has_flags(0b110));
    /// ```
    #[inline]
    #[must_use]
    pub const fn has_flags(self, mask: u8) -> bool {
        self.flags() & mask == mask
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signal")
            .field("flags", &format_args!("{:#010b}", self.flags()))
            .field("payload", &self.payload())
            .finish()
    }
}

/// A payload too large for a [`Signal`]'s 56 bits.
///
/// ```
/// use flowline::slot::{Signal, MAX_PAYLOAD};
/// let err = Signal::pack(0, MAX_PAYLOAD + 1).unwrap_err();
/// assert_eq!(err.payload(), MAX_PAYLOAD + 1);
/// assert!(err.to_string().contains("56 bits"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackError {
    payload: u64,
}

impl PackError {
    /// The payload that did not fit.
    ///
    /// ```
    /// use flowline::slot::{Signal, MAX_PAYLOAD};
    /// assert_eq!(Signal::pack(0, u64::MAX).unwrap_err().payload(), u64::MAX);
    /// ```
    #[must_use]
    pub fn payload(&self) -> u64 {
        self.payload
    }
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "signal payload {:#x} does not fit in {PAYLOAD_BITS} bits (max {MAX_PAYLOAD:#x}); \
             send a count, index or credit that fits, or use a raw word with Slot::post",
            self.payload
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for PackError {}

/// A bounded wait ran out before the slot showed what was asked for.
///
/// Carries the last word seen, so the caller can report or act on it.
///
/// ```
/// use std::time::Duration;
/// use flowline::slot::Slot;
///
/// let slot = Slot::new(7);
/// let err = slot.wait_until(|w| w == 8, Duration::from_millis(1)).unwrap_err();
/// assert_eq!(err.last_word(), 7);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub struct WaitTimeout {
    last_word: u64,
}

#[cfg(feature = "std")]
impl WaitTimeout {
    /// The last word the wait observed.
    ///
    /// ```
    /// use std::time::Duration;
    /// let s = flowline::slot::Slot::new(3);
    /// assert_eq!(s.wait_for_word(4, Duration::ZERO).unwrap_err().last_word(), 3);
    /// ```
    #[must_use]
    pub fn last_word(&self) -> u64 {
        self.last_word
    }
}

#[cfg(feature = "std")]
impl fmt::Display for WaitTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "slot wait timed out; last word seen {:#x} (is the writer alive, and posting?)",
            self.last_word
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for WaitTimeout {}

/// Spins (then yields) until `pred(load())` holds or `timeout` passes.
///
/// `Duration::MAX` (or any timeout whose deadline overflows `Instant`) waits forever. The
/// clock is read only once the spinning phase is over, so short waits never read it and a
/// wait may overrun its timeout by the length of that phase (microseconds).
#[inline]
#[cfg(feature = "std")]
fn wait_on(
    word: &AtomicU64,
    mut pred: impl FnMut(u64) -> bool,
    timeout: Duration,
) -> Result<u64, WaitTimeout> {
    let backoff = Backoff::new();
    let mut deadline: Option<Option<Instant>> = None;
    loop {
        // Acquire: pairs with the writer's Release post, so what it wrote before posting is
        // visible once the predicate accepts the word.
        let w = word.load(Ordering::Acquire);
        if pred(w) {
            return Ok(w);
        }
        if backoff.is_completed() && timeout != Duration::MAX {
            let d = *deadline.get_or_insert_with(|| Instant::now().checked_add(timeout));
            if let Some(d) = d {
                if Instant::now() >= d {
                    return Err(WaitTimeout { last_word: w });
                }
            }
        }
        backoff.snooze();
    }
}

/// One single-writer 64-bit word on its own padded cache line.
///
/// # Example
///
/// A worker posts its completion count; the distributor waits for it.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use flowline::slot::{Signal, Slot};
///
/// const DONE: u8 = 1;
/// let done = Arc::new(Slot::new(0)); // writer: the worker thread
/// let worker = {
///     let done = Arc::clone(&done);
///     std::thread::spawn(move || done.post_signal(Signal::pack(DONE, 32).unwrap()))
/// };
/// let s = done.wait_for_flags(DONE, Duration::from_secs(10)).unwrap();
/// assert_eq!(s.payload(), 32);
/// worker.join().unwrap();
/// ```
pub struct Slot {
    word: CachePadded<AtomicU64>,
}

impl Slot {
    /// A slot holding `initial`.
    ///
    /// ```
    /// assert_eq!(flowline::slot::Slot::new(3).load(), 3);
    /// ```
    #[must_use]
    pub fn new(initial: u64) -> Slot {
        Slot {
            word: CachePadded::new(AtomicU64::new(initial)),
        }
    }

    /// Publishes `word` (a `Release` store). Writer only.
    ///
    /// ```
    /// let slot = flowline::slot::Slot::new(0);
    /// slot.post(9);
    /// assert_eq!(slot.load(), 9);
    /// ```
    #[inline]
    pub fn post(&self, word: u64) {
        // Release: pairs with the reader's Acquire load in `load`/`wait_*`, publishing what
        // the writer wrote before this post.
        self.word.store(word, Ordering::Release);
    }

    /// Publishes a packed [`Signal`]. Writer only.
    ///
    /// ```
    /// use flowline::slot::{Signal, Slot};
    /// let slot = Slot::new(0);
    /// slot.post_signal(Signal::pack(2, 5).unwrap());
    /// assert_eq!(slot.load_signal().payload(), 5);
    /// ```
    #[inline]
    pub fn post_signal(&self, signal: Signal) {
        self.post(signal.word());
    }

    /// Replaces the word with `f(current)` and returns the new word. **Writer only**: this is
    /// a plain load and store (no atomic read-modify-write, no lock prefix), correct only
    /// because no one else writes the slot.
    ///
    /// ```
    /// let completed = flowline::slot::Slot::new(0);
    /// completed.update(|n| n + 32);
    /// assert_eq!(completed.update(|n| n + 8), 40);
    /// ```
    #[inline]
    pub fn update(&self, f: impl FnOnce(u64) -> u64) -> u64 {
        // Relaxed: the single writer reads back its own latest store (coherence order), so no
        // synchronisation is needed; the store is the Release post.
        let new = f(self.word.load(Ordering::Relaxed));
        self.post(new);
        new
    }

    /// The current word (an `Acquire` load).
    ///
    /// ```
    /// assert_eq!(flowline::slot::Slot::new(1).load(), 1);
    /// ```
    #[inline]
    pub fn load(&self) -> u64 {
        // Acquire: pairs with the writer's Release `post`.
        self.word.load(Ordering::Acquire)
    }

    /// The current word as a [`Signal`].
    ///
    /// ```
    /// use flowline::slot::{Signal, Slot};
    /// let slot = Slot::new(Signal::pack(4, 4).unwrap().word());
    /// assert_eq!(slot.load_signal().flags(), 4);
    /// ```
    #[inline]
    pub fn load_signal(&self) -> Signal {
        Signal::from_word(self.load())
    }

    /// Waits until `pred(word)` holds and returns that word, spinning with exponential
    /// backoff and then yielding; gives up after `timeout` (`Duration::MAX`: never).
    ///
    /// # Errors
    ///
    /// [`WaitTimeout`] with the last word seen, if `timeout` passed first.
    ///
    /// ```
    /// use std::time::Duration;
    /// let slot = flowline::slot::Slot::new(5);
    /// assert_eq!(slot.wait_until(|w| w >= 5, Duration::from_secs(1)), Ok(5));
    /// ```
    #[cfg(feature = "std")]
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    pub fn wait_until(
        &self,
        pred: impl FnMut(u64) -> bool,
        timeout: Duration,
    ) -> Result<u64, WaitTimeout> {
        wait_on(&self.word, pred, timeout)
    }

    /// Waits until the word equals `word`.
    ///
    /// # Errors
    ///
    /// [`WaitTimeout`] if `timeout` passed first.
    ///
    /// ```
    /// use std::time::Duration;
    /// let slot = flowline::slot::Slot::new(0);
    /// assert!(slot.wait_for_word(1, Duration::from_millis(1)).is_err());
    /// slot.post(1);
    /// assert!(slot.wait_for_word(1, Duration::from_millis(1)).is_ok());
    /// ```
    #[cfg(feature = "std")]
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    pub fn wait_for_word(&self, word: u64, timeout: Duration) -> Result<(), WaitTimeout> {
        self.wait_until(|w| w == word, timeout).map(|_| ())
    }

    /// Waits until every bit of `mask` is set in the word's flags; returns the signal seen.
    ///
    /// # Errors
    ///
    /// [`WaitTimeout`] if `timeout` passed first.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::slot::{Signal, Slot};
    /// let slot = Slot::new(Signal::pack(0b11, 7).unwrap().word());
    /// let s = slot.wait_for_flags(0b10, Duration::from_secs(1)).unwrap();
    /// assert_eq!(s.payload(), 7);
    /// ```
    #[cfg(feature = "std")]
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    pub fn wait_for_flags(&self, mask: u8, timeout: Duration) -> Result<Signal, WaitTimeout> {
        self.wait_until(|w| Signal::from_word(w).has_flags(mask), timeout)
            .map(Signal::from_word)
    }
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Slot").field(&self.load_signal()).finish()
    }
}

impl Default for Slot {
    fn default() -> Self {
        Slot::new(0)
    }
}

/// A padded line of [`WORDS_PER_LINE`] single-writer words, for signals read as a group.
///
/// Each word has its own single writer (often the same party writes them all); a reader
/// that loads several words pays one line transfer for all of them. Word indices out of
/// range panic.
///
/// # Example
///
/// ```
/// use flowline::slot::{SlotLine, WORDS_PER_LINE};
///
/// let credits = SlotLine::new(); // writer: the distributor
/// for w in 0..WORDS_PER_LINE {
///     credits.post(w, 32);
/// }
/// assert!(credits.load_all().iter().all(|&c| c == 32));
/// ```
pub struct SlotLine {
    words: CachePadded<[AtomicU64; WORDS_PER_LINE]>,
}

impl SlotLine {
    /// A line with every word zero.
    ///
    /// ```
    /// assert_eq!(flowline::slot::SlotLine::new().load(0), 0);
    /// ```
    #[must_use]
    pub fn new() -> SlotLine {
        SlotLine {
            words: CachePadded::new(core::array::from_fn(|_| AtomicU64::new(0))),
        }
    }

    /// Number of words: [`WORDS_PER_LINE`].
    ///
    /// ```
    /// use flowline::slot::{SlotLine, WORDS_PER_LINE};
    /// assert_eq!(SlotLine::new().len(), WORDS_PER_LINE);
    /// ```
    #[allow(clippy::len_without_is_empty)] // never empty: the length is a constant
    pub const fn len(&self) -> usize {
        WORDS_PER_LINE
    }

    #[inline]
    fn word(&self, index: usize) -> &AtomicU64 {
        match self.words.get(index) {
            Some(w) => w,
            None => panic!(
                "SlotLine word index {index} out of range: a line holds {WORDS_PER_LINE} words"
            ),
        }
    }

    /// Publishes `word` at `index` (a `Release` store). That word's writer only.
    ///
    /// # Panics
    ///
    /// If `index >= WORDS_PER_LINE`.
    ///
    /// ```
    /// let line = flowline::slot::SlotLine::new();
    /// line.post(1, 11);
    /// assert_eq!(line.load(1), 11);
    /// ```
    #[inline]
    pub fn post(&self, index: usize, word: u64) {
        // Release: pairs with the Acquire loads in `load`, `load_all` and `wait_until`.
        self.word(index).store(word, Ordering::Release);
    }

    /// Replaces word `index` with `f(current)` and returns it; that word's writer only (a
    /// load and a store, as [`Slot::update`]).
    ///
    /// # Panics
    ///
    /// If `index >= WORDS_PER_LINE`.
    ///
    /// ```
    /// let line = flowline::slot::SlotLine::new();
    /// assert_eq!(line.update(0, |c| c + 1), 1);
    /// ```
    #[inline]
    pub fn update(&self, index: usize, f: impl FnOnce(u64) -> u64) -> u64 {
        let w = self.word(index);
        // Relaxed: the word's single writer reads back its own latest store.
        let new = f(w.load(Ordering::Relaxed));
        // Release: as in `post`.
        w.store(new, Ordering::Release);
        new
    }

    /// Word `index` (an `Acquire` load).
    ///
    /// # Panics
    ///
    /// If `index >= WORDS_PER_LINE`.
    ///
    /// ```
    /// assert_eq!(flowline::slot::SlotLine::new().load(2), 0);
    /// ```
    #[inline]
    pub fn load(&self, index: usize) -> u64 {
        // Acquire: pairs with the writer's Release `post`.
        self.word(index).load(Ordering::Acquire)
    }

    /// Every word, each an `Acquire` load (one line transfer for the group; the words are
    /// not one atomic snapshot if several are being posted meanwhile).
    ///
    /// ```
    /// let line = flowline::slot::SlotLine::new();
    /// line.post(0, 1);
    /// assert_eq!(line.load_all()[0], 1);
    /// ```
    pub fn load_all(&self) -> [u64; WORDS_PER_LINE] {
        // Acquire: pairs with each word's Release `post`.
        core::array::from_fn(|i| self.words[i].load(Ordering::Acquire))
    }

    /// Waits until `pred(word)` holds for word `index`, as [`Slot::wait_until`].
    ///
    /// # Errors
    ///
    /// [`WaitTimeout`] if `timeout` passed first.
    ///
    /// # Panics
    ///
    /// If `index >= WORDS_PER_LINE`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let line = flowline::slot::SlotLine::new();
    /// line.post(3, 1);
    /// assert_eq!(line.wait_until(3, |w| w == 1, Duration::from_secs(1)), Ok(1));
    /// ```
    #[cfg(feature = "std")]
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    pub fn wait_until(
        &self,
        index: usize,
        pred: impl FnMut(u64) -> bool,
        timeout: Duration,
    ) -> Result<u64, WaitTimeout> {
        wait_on(self.word(index), pred, timeout)
    }
}

impl Default for SlotLine {
    fn default() -> Self {
        SlotLine::new()
    }
}

impl fmt::Debug for SlotLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SlotLine").field(&self.load_all()).finish()
    }
}

// Layout: a slot and a slot line each fill exactly one padded unit and start on its
// boundary, so no other data shares their line (or, on x86_64, their prefetch pair).
#[cfg(not(loom))]
mod layout {
    use super::*;
    use static_assertions::const_assert_eq;

    const_assert_eq!(size_of::<Slot>(), LINE_BYTES);
    const_assert_eq!(align_of::<Slot>(), LINE_BYTES);
    const_assert_eq!(size_of::<SlotLine>(), LINE_BYTES);
    const_assert_eq!(align_of::<SlotLine>(), LINE_BYTES);
    const_assert_eq!(WORDS_PER_LINE * size_of::<u64>(), LINE_BYTES);
    #[cfg(target_arch = "x86_64")]
    const_assert_eq!(LINE_BYTES, 128);
}

#[cfg(all(test, not(loom)))]
mod tests;
