//! Threaded stress tests of the rings and their waits.

mod mpsc;
mod spsc;
mod wait;
