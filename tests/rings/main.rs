//! Ring behaviours across index wrap, teardown and soundness: items dropped exactly once, nothing read twice, panicking item code contained.

mod niche_teardown;
mod soundness;
mod wrap;
