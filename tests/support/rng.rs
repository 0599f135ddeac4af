//! The tests' one pseudo-random generator: xorshift64 (shifts 13, 7, 17), small and
//! deterministic, so that a seed always gives the same sequence (tests pick seeds, and
//! some check values that follow from the sequence).

/// xorshift64: each call shifts the state and returns the new state.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Starts from `seed | 1` (never the all-zero state, which xorshift never leaves).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// Starts from exactly `state` (0 gives only zeros), for sequences first seeded that
    /// way.
    pub fn from_state(state: u64) -> Rng {
        Rng(state)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
