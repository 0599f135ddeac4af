//! `std::io` for byte rings (`std`): the producer end of a `mpsc` ring of `u8` is an
//! [`io::Write`], the consumer end an [`io::Read`], as rtrb's are. Neither blocks: a full
//! ring (write) or an empty one (read) is [`io::ErrorKind::WouldBlock`]; a read of an
//! empty ring whose producers are gone is the end of the stream (`Ok(0)`).

use super::*;
use std::io;

impl<W: WaitMode> io::Write for Producer<u8, W> {
    /// Pushes what fits of `buf` with one publication; `WouldBlock` if nothing fits.
    ///
    /// ```
    /// use std::io::{ErrorKind, Write};
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert_eq!(tx.write(b"hello").unwrap(), 4);
    /// assert_eq!(tx.write(b"o").unwrap_err().kind(), ErrorKind::WouldBlock);
    /// assert_eq!(rx.pop(), Some(b'h'));
    /// ```
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match self.push_burst(buf) {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }

    /// Nothing to do: every write is published when it returns.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: WaitMode> io::Read for Consumer<u8, W> {
    /// Takes what is there, up to `buf.len()`, with one release; `WouldBlock` if nothing is
    /// there yet, `Ok(0)` (end of stream) once the ring is empty and its producers are gone.
    ///
    /// ```
    /// use std::io::{ErrorKind, Read};
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(8).unwrap();
    /// let mut buf = [0; 8];
    /// assert_eq!(rx.read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
    /// assert_eq!(tx.push_burst(b"hi"), 2);
    /// drop(tx);
    /// assert_eq!(rx.read(&mut buf).unwrap(), 2);
    /// assert_eq!(&buf[..2], b"hi");
    /// assert_eq!(rx.read(&mut buf).unwrap(), 0); // end of stream
    /// ```
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match self.pop_burst(buf) {
            0 if self.is_abandoned() => Ok(self.pop_burst(buf)),
            0 => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }
}
