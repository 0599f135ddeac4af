//! Cores and thread pinning.
//!
//! Cross-core figures only mean something when the threads stay on the cores they were
//! measured on, and a hot-path thread that migrates takes its cache with it. On Linux these
//! functions use `sched_setaffinity` / `sched_getcpu`; elsewhere pinning is a no-op that
//! says so, and there is one CPU index per thread (so callers that pick shards by CPU still
//! spread).
//!
//! NUMA nodes are not read yet (see the CHANGELOG); every CPU is reported on node 0.

use std::io;

/// Number of CPUs this process may run on (at least 1).
///
/// ```
/// assert!(flowline::topology::available_cpus() >= 1);
/// ```
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Pins the calling thread to CPU `cpu`.
///
/// # Errors
///
/// The OS error if the CPU does not exist or is not allowed (Linux), or
/// [`io::ErrorKind::Unsupported`] where pinning is not implemented.
///
/// ```
/// // CPU 0 exists everywhere; on non-Linux systems this reports Unsupported.
/// let r = flowline::topology::pin_current_thread(0);
/// assert!(r.is_ok() || r.unwrap_err().kind() == std::io::ErrorKind::Unsupported);
/// ```
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    imp::pin_current_thread(cpu)
}

/// The CPU the calling thread runs on right now, if the OS says (Linux `sched_getcpu`).
/// It may change the moment this returns unless the thread is pinned.
///
/// ```
/// if let Some(cpu) = flowline::topology::current_cpu() {
///     assert!(cpu < 4096);
/// }
/// ```
#[inline]
pub fn current_cpu() -> Option<usize> {
    imp::current_cpu()
}

#[cfg(all(target_os = "linux", not(miri)))]
mod imp {
    use std::io;

    pub(super) fn pin_current_thread(cpu: usize) -> io::Result<()> {
        let bits = 8 * core::mem::size_of::<libc::cpu_set_t>();
        if cpu >= bits {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond the {bits} CPUs a cpu_set_t can name"),
            ));
        }
        // SAFETY: cpu_set_t is a plain bit array for which all-zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
        // SAFETY: `cpu < bits` was checked above, so CPU_SET stays inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
        // SAFETY: `set` is a valid, initialised cpu_set_t and the size passed is its size;
        // pid 0 means the calling thread.
        let rc =
            unsafe { libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    #[inline]
    pub(super) fn current_cpu() -> Option<usize> {
        // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's state.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).ok()
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
mod imp {
    use std::io;

    pub(super) fn pin_current_thread(_cpu: usize) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "thread pinning is implemented for Linux only",
        ))
    }

    #[inline]
    pub(super) fn current_cpu() -> Option<usize> {
        None
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn pinning_to_an_absurd_cpu_is_an_error_not_a_crash() {
        assert!(pin_current_thread(1 << 20).is_err());
    }

    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn pinned_thread_runs_where_pinned() {
        std::thread::spawn(|| {
            pin_current_thread(0).unwrap();
            assert_eq!(current_cpu(), Some(0));
        })
        .join()
        .unwrap();
    }
}
