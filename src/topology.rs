//! Cores, NUMA nodes and thread pinning.
//!
//! Cross-core figures only mean something when the threads stay on the cores they were
//! measured on, and a hot-path thread that migrates takes its cache with it. On Linux these
//! functions use `sched_setaffinity` / `sched_getcpu`; elsewhere pinning is a no-op that
//! says so, and there is one CPU index per thread (so callers that pick shards by CPU still
//! spread).
//!
//! [`Topology`] says which CPUs belong to which NUMA node and which CPUs are SMT siblings
//! (hyper-threads of one core). [`Topology::detect`] takes, in this order: a topology
//! declared in the environment variable `FLOWLINE_TOPOLOGY` (see
//! [`Topology::parse_declared`]: `"0;1"` makes a two-CPU machine two simulated nodes), the
//! Linux sysfs (`/sys/devices/system/node/node*/cpulist`, `cpu/online`,
//! `cpu/cpu*/topology/thread_siblings_list`), or one node holding every CPU when sysfs
//! cannot be read (other systems, containers that hide it). It never panics on what it
//! reads; a malformed sysfs gives the one-node answer and says so in
//! [`Topology::source`].

use std::fmt;
use std::io;
use std::path::Path;

/// Number of CPUs this process may run on (at least 1).
///
/// ```
/// assert!(flowline::topology::available_cpus() >= 1);
/// ```
#[must_use]
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
#[must_use]
pub fn current_cpu() -> Option<usize> {
    imp::current_cpu()
}

/// The most CPUs a CPU list may name (CPU indices are below this). Linux's own limit
/// (`NR_CPUS`) is 8192 at most; a larger index is a malformed list.
pub const MAX_CPUS: usize = 8192;

/// The environment variable [`Topology::detect`] reads first.
pub const TOPOLOGY_ENV: &str = "FLOWLINE_TOPOLOGY";

/// A CPU list or a topology that cannot be used, with what was wrong.
///
/// ```
/// use flowline::topology::{parse_cpu_list, TopologyError};
/// assert!(matches!(parse_cpu_list("3-1"), Err(TopologyError::BadCpuList { .. })));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyError {
    /// A CPU list (`0-7,16-23`) that does not parse.
    BadCpuList {
        /// The text as given.
        list: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A declared topology with no node, a node without CPUs, or a CPU in two nodes.
    BadDeclaration {
        /// The declaration as given (or a description of the slices).
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A sysfs tree that could not be read or made no sense.
    Sysfs {
        /// The file or directory.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::BadCpuList { list, reason } => write!(
                f,
                "bad CPU list {list:?}: {reason} (expected comma-separated CPUs and ranges \
                 such as 0-7,16-23)"
            ),
            TopologyError::BadDeclaration { spec, reason } => write!(
                f,
                "bad topology declaration {spec:?}: {reason} (expected one CPU list per node, \
                 separated by ';', such as \"0-3;4-7\")"
            ),
            TopologyError::Sysfs { path, reason } => write!(f, "sysfs {path}: {reason}"),
        }
    }
}

impl std::error::Error for TopologyError {}

/// Parses a Linux CPU list (`0-7,16-23`, `0,2,4`, or empty) into sorted, distinct CPU
/// indices. Surrounding whitespace (the newline sysfs files end with) is ignored.
///
/// # Errors
///
/// [`TopologyError::BadCpuList`] for anything else: a missing or non-numeric bound, a
/// reversed range, a CPU index of [`MAX_CPUS`] or more.
///
/// ```
/// use flowline::topology::parse_cpu_list;
/// assert_eq!(parse_cpu_list("0-2,8\n").unwrap(), [0, 1, 2, 8]);
/// assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
/// assert!(parse_cpu_list("0-").is_err());
/// ```
pub fn parse_cpu_list(list: &str) -> Result<Vec<usize>, TopologyError> {
    let bad = |reason| TopologyError::BadCpuList {
        list: list.to_string(),
        reason,
    };
    let num = |t: &str| -> Result<usize, TopologyError> {
        let t = t.trim();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("a CPU is not a number"));
        }
        match t.parse::<usize>() {
            Ok(n) if n < MAX_CPUS => Ok(n),
            _ => Err(bad("a CPU index is beyond MAX_CPUS")),
        }
    };
    let mut cpus = Vec::new();
    let text = list.trim();
    if text.is_empty() {
        return Ok(cpus);
    }
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(bad("a range runs backwards"));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// One NUMA node: its number and its (online) CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The node's number (sysfs `nodeN`, or the position in a declaration).
    pub id: usize,
    /// Its online CPUs, sorted.
    pub cpus: Vec<usize>,
}

/// Where a [`Topology`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Read from Linux sysfs.
    Sysfs,
    /// Declared by the program ([`Topology::declared`], [`Topology::parse_declared`]).
    Declared,
    /// Declared in the environment variable [`TOPOLOGY_ENV`].
    Environment,
    /// Nothing could be read: one node holding every CPU the process may use.
    Fallback,
}

/// CPUs grouped into NUMA nodes, with SMT siblings: see the [module docs](self).
///
/// ```
/// use flowline::topology::{Source, Topology};
/// let t = Topology::parse_declared("0-3;4-7").unwrap();
/// assert_eq!(t.nodes().len(), 2);
/// assert_eq!(t.node_of(5), Some(1));
/// assert_eq!(t.source(), Source::Declared);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<Node>,
    /// `(cpu, its SMT siblings including itself)`, sorted by CPU.
    siblings: Vec<(usize, Vec<usize>)>,
    source: Source,
}

impl Topology {
    /// The topology of this machine: [`TOPOLOGY_ENV`] if set, else sysfs, else one node
    /// (see the [module docs](self)).
    ///
    /// # Errors
    ///
    /// Only for a malformed `FLOWLINE_TOPOLOGY`, or one naming a CPU this process may not
    /// run on (the user asked for something that cannot be honoured); sysfs problems give
    /// the one-node answer instead.
    ///
    /// ```
    /// let t = flowline::topology::Topology::detect().unwrap();
    /// assert!(!t.nodes().is_empty() && t.cpus().count() >= 1);
    /// ```
    pub fn detect() -> Result<Topology, TopologyError> {
        if let Ok(spec) = std::env::var(TOPOLOGY_ENV) {
            let mut t = Topology::parse_declared(&spec)?;
            if let Some(allowed) = imp::allowed_cpus() {
                if let Some(c) = t.cpus().find(|c| !allowed.contains(c)) {
                    return Err(TopologyError::BadDeclaration {
                        spec,
                        reason: format!(
                            "CPU {c} is not one this process may run on (allowed: {allowed:?})"
                        ),
                    });
                }
            }
            t.source = Source::Environment;
            return Ok(t);
        }
        Ok(Topology::from_sysfs(Path::new("/sys/devices/system"))
            .unwrap_or_else(|_| Topology::single_node(available_cpus())))
    }

    /// One node holding CPUs `0..cpus` (at least one), each its own SMT group: the answer
    /// where nothing better is known.
    ///
    /// ```
    /// let t = flowline::topology::Topology::single_node(2);
    /// assert_eq!(t.nodes()[0].cpus, [0, 1]);
    /// ```
    #[must_use]
    pub fn single_node(cpus: usize) -> Topology {
        let cpus: Vec<usize> = (0..cpus.clamp(1, MAX_CPUS)).collect();
        Topology {
            siblings: cpus.iter().map(|&c| (c, vec![c])).collect(),
            nodes: vec![Node { id: 0, cpus }],
            source: Source::Fallback,
        }
    }

    /// A declared topology: node `i` holds the CPUs of `nodes[i]`; each CPU is its own SMT
    /// group.
    ///
    /// # Errors
    ///
    /// [`TopologyError::BadDeclaration`] for no node, a node without CPUs, a CPU named in
    /// two nodes, or a CPU index of [`MAX_CPUS`] or more.
    ///
    /// ```
    /// use flowline::topology::Topology;
    /// let t = Topology::declared(&[&[0], &[1]]).unwrap();
    /// assert_eq!(t.node_of(1), Some(1));
    /// assert!(Topology::declared(&[&[0], &[0]]).is_err());
    /// ```
    pub fn declared(nodes: &[&[usize]]) -> Result<Topology, TopologyError> {
        let spec = || format!("{nodes:?}");
        let lists = nodes
            .iter()
            .map(|cpus| {
                let mut v = cpus.to_vec();
                v.sort_unstable();
                v.dedup();
                v
            })
            .collect();
        Topology::from_lists(lists, Vec::new(), Source::Declared).map_err(|reason| {
            TopologyError::BadDeclaration {
                spec: spec(),
                reason,
            }
        })
    }

    /// Parses a declaration: one CPU list per node, separated by `;` (`"0-3;4-7"`, or
    /// `"0;1"` for two single-CPU nodes), the form `FLOWLINE_TOPOLOGY` takes.
    ///
    /// # Errors
    ///
    /// [`TopologyError::BadDeclaration`] as for [`declared`](Self::declared), also for a
    /// CPU list that does not parse.
    ///
    /// ```
    /// use flowline::topology::Topology;
    /// assert_eq!(Topology::parse_declared("0;1").unwrap().nodes().len(), 2);
    /// assert!(Topology::parse_declared("0;;1").is_err());
    /// ```
    pub fn parse_declared(spec: &str) -> Result<Topology, TopologyError> {
        let bad = |reason: String| TopologyError::BadDeclaration {
            spec: spec.to_string(),
            reason,
        };
        let lists = spec
            .trim()
            .split(';')
            .map(|l| parse_cpu_list(l).map_err(|e| bad(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Topology::from_lists(lists, Vec::new(), Source::Declared).map_err(bad)
    }

    /// Reads a sysfs tree rooted at `root` (normally `/sys/devices/system`; tests pass a
    /// copy): every `node/nodeN/cpulist`, restricted to `cpu/online` when that file exists,
    /// and each online CPU's `cpu/cpuK/topology/thread_siblings_list` (a CPU without one
    /// is its own group). Nodes without online CPUs (memory-only nodes) are left out.
    ///
    /// # Errors
    ///
    /// [`TopologyError::Sysfs`] when the node directory cannot be listed, a file cannot be
    /// read or parsed, a CPU is in two nodes, or no node has an online CPU.
    ///
    /// ```
    /// use flowline::topology::Topology;
    /// // Wherever sysfs is missing, this is an error (and `detect` falls back).
    /// assert!(Topology::from_sysfs(std::path::Path::new("/nonexistent")).is_err());
    /// ```
    pub fn from_sysfs(root: &Path) -> Result<Topology, TopologyError> {
        let err = |path: &Path, reason: String| TopologyError::Sysfs {
            path: path.display().to_string(),
            reason,
        };
        let read_list = |path: &Path| -> Result<Vec<usize>, TopologyError> {
            let text = std::fs::read_to_string(path).map_err(|e| err(path, e.to_string()))?;
            parse_cpu_list(&text).map_err(|e| err(path, e.to_string()))
        };
        let online_path = root.join("cpu/online");
        let online = if online_path.exists() {
            Some(read_list(&online_path)?)
        } else {
            None
        };
        let node_dir = root.join("node");
        let entries = std::fs::read_dir(&node_dir).map_err(|e| err(&node_dir, e.to_string()))?;
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| err(&node_dir, e.to_string()))?;
            let name = entry.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            let mut cpus = read_list(&entry.path().join("cpulist"))?;
            if let Some(online) = &online {
                cpus.retain(|c| online.binary_search(c).is_ok());
            }
            if !cpus.is_empty() {
                found.push((id, cpus));
            }
        }
        found.sort_unstable();
        let mut siblings = Vec::new();
        for (_, cpus) in &found {
            for &cpu in cpus {
                let path = root.join(format!("cpu/cpu{cpu}/topology/thread_siblings_list"));
                let mut group = if path.exists() {
                    read_list(&path)?
                } else {
                    vec![cpu]
                };
                if let Some(online) = &online {
                    group.retain(|c| online.binary_search(c).is_ok());
                }
                if group.binary_search(&cpu).is_err() {
                    return Err(err(&path, format!("does not list CPU {cpu} itself")));
                }
                siblings.push((cpu, group));
            }
        }
        let ids: Vec<usize> = found.iter().map(|(id, _)| *id).collect();
        let lists = found.into_iter().map(|(_, cpus)| cpus).collect();
        let mut t = Topology::from_lists(lists, siblings, Source::Sysfs)
            .map_err(|reason| err(&node_dir, reason))?;
        for (node, id) in t.nodes.iter_mut().zip(ids) {
            node.id = id;
        }
        Ok(t)
    }

    /// Checks node CPU lists (sorted, distinct within a node) and builds the topology;
    /// CPUs without an entry in `siblings` are their own SMT group.
    fn from_lists(
        lists: Vec<Vec<usize>>,
        mut siblings: Vec<(usize, Vec<usize>)>,
        source: Source,
    ) -> Result<Topology, String> {
        if lists.is_empty() {
            return Err("no node".into());
        }
        let mut all: Vec<usize> = Vec::new();
        for (i, cpus) in lists.iter().enumerate() {
            if cpus.is_empty() {
                return Err(format!("node {i} has no CPU"));
            }
            if let Some(&c) = cpus.iter().find(|&&c| c >= MAX_CPUS) {
                return Err(format!("CPU {c} is beyond MAX_CPUS ({MAX_CPUS})"));
            }
            all.extend(cpus);
        }
        all.sort_unstable();
        if let Some(w) = all.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("CPU {} is in two nodes", w[0]));
        }
        siblings.sort_unstable();
        for &c in &all {
            if siblings.binary_search_by_key(&c, |(cpu, _)| *cpu).is_err() {
                siblings.push((c, vec![c]));
            }
        }
        siblings.sort_unstable();
        Ok(Topology {
            nodes: lists
                .into_iter()
                .enumerate()
                .map(|(id, cpus)| Node { id, cpus })
                .collect(),
            siblings,
            source,
        })
    }

    /// The nodes, in order of their numbers.
    ///
    /// ```
    /// let t = flowline::topology::Topology::parse_declared("2,3;0,1").unwrap();
    /// assert_eq!(t.nodes()[0].cpus, [2, 3]);
    /// ```
    #[must_use]
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The position in [`nodes`](Self::nodes) of the node that holds `cpu`, if any.
    ///
    /// ```
    /// let t = flowline::topology::Topology::parse_declared("0;1").unwrap();
    /// assert_eq!((t.node_of(0), t.node_of(1), t.node_of(2)), (Some(0), Some(1), None));
    /// ```
    #[must_use]
    pub fn node_of(&self, cpu: usize) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.cpus.binary_search(&cpu).is_ok())
    }

    /// Every CPU of every node, in order.
    ///
    /// ```
    /// let t = flowline::topology::Topology::parse_declared("4;0-1").unwrap();
    /// assert_eq!(t.cpus().collect::<Vec<_>>(), [0, 1, 4]);
    /// ```
    pub fn cpus(&self) -> impl Iterator<Item = usize> + '_ {
        self.siblings.iter().map(|(cpu, _)| *cpu)
    }

    /// The SMT siblings of `cpu` (the hardware threads of its core, itself included), or
    /// an empty slice for a CPU not in the topology.
    ///
    /// ```
    /// let t = flowline::topology::Topology::single_node(2);
    /// assert_eq!(t.smt_siblings(1), [1]);
    /// assert!(t.smt_siblings(9).is_empty());
    /// ```
    #[must_use]
    pub fn smt_siblings(&self, cpu: usize) -> &[usize] {
        match self.siblings.binary_search_by_key(&cpu, |(c, _)| *c) {
            Ok(i) => &self.siblings[i].1,
            Err(_) => &[],
        }
    }

    /// Where this topology came from.
    ///
    /// ```
    /// use flowline::topology::{Source, Topology};
    /// assert_eq!(Topology::single_node(1).source(), Source::Fallback);
    /// ```
    #[must_use]
    pub fn source(&self) -> Source {
        self.source
    }
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

    /// The CPUs the calling thread may run on, if the OS says.
    pub(super) fn allowed_cpus() -> Option<Vec<usize>> {
        // SAFETY: cpu_set_t is a plain bit array for which all-zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
        // SAFETY: `set` is a valid cpu_set_t and the size passed is its size; pid 0 means
        // the calling thread.
        let rc = unsafe {
            libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set)
        };
        if rc != 0 {
            return None;
        }
        let bits = 8 * core::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: every `c < bits` is inside `set`.
        Some(
            (0..bits)
                .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
                .collect(),
        )
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

    pub(super) fn allowed_cpus() -> Option<Vec<usize>> {
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
