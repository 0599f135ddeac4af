//! Ring behaviours across index wrap and in teardown: items dropped exactly once, nothing
//! read twice, panicking item code contained.

mod soundness;
mod wrap;
