//! The waiting forms: blocking bursts, async futures and wakers, and the item stream.

// Each binary uses part of the shared support code.
#[allow(dead_code)]
#[cfg(all(not(loom), feature = "std"))]
#[path = "../support/mod.rs"]
mod support;

mod async_io;
mod async_stream;
mod async_wait;
mod burst_waits;
mod byte_io;
