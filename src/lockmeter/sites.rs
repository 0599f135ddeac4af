//! Lock sites and their counts: one site per call site or lock name, its counters sharded
//! per thread (a thread's counts live in its own counter group, so recording takes no
//! shared line), and the registry that finds a site by name.

use super::*;

pub(super) const TOTAL: usize = 0;
pub(super) const CONTENDED: usize = 1;
pub(super) const REJECTED: usize = 2;
/// Ticks held, summed over the timed holds (see [`Sampling`]).
pub(super) const HOLD: usize = 3;
pub(super) const WAIT: usize = 4;
/// Holds that were timed.
pub(super) const TIMED: usize = 5;
pub(super) const FIELDS: usize = 6;
pub(super) const NAMES: [&str; FIELDS] =
    ["total", "contended", "rejected", "hold", "wait", "timed"];
/// Shards per site: threads beyond this many recording at once share `overflow`.
pub(super) const SHARDS: usize = 64;

/// One lock site's figures, written by the threads that use it.
pub(super) struct Site {
    pub(super) name: String,
    /// `None` where a padded line holds fewer than 8 words (32-byte `CachePadded` targets):
    /// everything is then counted on `overflow`.
    pub(super) group: Option<Arc<CounterGroup<FIELDS>>>,
    /// Counts of threads that found every shard taken (shared; on its own line, so the
    /// fields every record reads stay clean).
    pub(super) overflow: CachePadded<[AtomicU64; 6]>,
    pub(super) hold_max: AtomicU64,
    pub(super) wait_max: AtomicU64,
    /// Ticks when the earliest recorded use began (lowered by a record that began earlier
    /// than every one before it: records arrive when holds end, not when waits start).
    pub(super) since: AtomicU64,
}

impl Site {
    #[inline(always)]
    /// Adds `deltas`; `timed`: what an acquisition that waited or was timed adds to the
    /// maxima and the site's start.
    pub(super) fn record(
        &self,
        h: Option<&mut GroupHandle<FIELDS>>,
        deltas: [u64; FIELDS],
        timed: Option<Timed>,
    ) {
        match h {
            Some(h) => h.add_all(deltas),
            None => {
                for (o, d) in self.overflow.iter().zip(deltas) {
                    if d != 0 {
                        // Relaxed: a statistic, read as a snapshot.
                        o.fetch_add(d, Ordering::Relaxed);
                    }
                }
            }
        }
        if let Some(t) = timed {
            if let Some(held) = t.held {
                raise(&self.hold_max, held);
            }
            raise(&self.wait_max, deltas[WAIT]);
            // Relaxed: a statistic. Read first: a shared write only for a new earliest
            // start.
            if t.began < self.since.load(Ordering::Relaxed) {
                self.since.fetch_min(t.began, Ordering::Relaxed);
            }
        }
    }
}

/// What an acquisition that waited or whose hold was timed adds beyond its counts.
#[derive(Clone, Copy)]
pub(super) struct Timed {
    /// Ticks held, if the hold was timed.
    pub(super) held: Option<u64>,
    /// Ticks when its wait (or, if it did not wait, its hold) began.
    pub(super) began: u64,
}

/// Raises `max` to `v` if `v` is larger, writing the shared line only then.
#[inline(always)]
fn raise(max: &AtomicU64, v: u64) {
    // Relaxed: statistics, no other memory is published through them.
    if v > max.load(Ordering::Relaxed) {
        max.fetch_max(v, Ordering::Relaxed);
    }
}

/// Whose figures an acquisition counts toward: the lock's name if it has one, else the
/// `#[track_caller]` call site. Word-sized fields only (`Option<&str>` keeps its tag in the
/// pointer): a guard is built with word stores and moved with wide loads, and a byte-wide
/// enum tag in between made each move miss store-to-load forwarding
/// (`docs/performance-notes.md`, section 12).
#[derive(Clone, Copy)]
pub(super) struct Who {
    pub(super) name: Option<&'static str>,
    pub(super) caller: &'static Location<'static>,
}

impl Who {
    #[inline(always)]
    pub(super) fn of(name: Option<&'static str>, caller: &'static Location<'static>) -> Who {
        Who { name, caller }
    }

    /// The identity a thread's cache compares: the address of the name (with its length,
    /// so that two names sharing a prefix stay apart) or of the location (with a length no
    /// `str` can have). Both are `'static`, so addresses are stable.
    #[inline(always)]
    fn key(&self) -> Key {
        match self.name {
            Some(n) => Key(n.as_ptr() as usize, n.len()),
            None => Key(self.caller as *const Location<'static> as usize, usize::MAX),
        }
    }

    /// The site's displayed name: the lock's name, or `file:line`.
    fn display(self) -> String {
        match self.name {
            Some(n) => n.to_string(),
            None => format!("{}:{}", self.caller.file(), self.caller.line()),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Key(usize, usize);

/// Every site, by its displayed name (a lock's name, or `file:line`): two locks given the
/// same name, or two call sites on one line, are one site.
pub(super) fn registry() -> &'static Mutex<HashMap<String, Arc<Site>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Arc<Site>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// This thread's handles on the sites it used.
pub(super) struct Local {
    site: Arc<Site>,
    handle: Option<GroupHandle<FIELDS>>,
}

/// This thread's sites: the one used last inline (reached with no pointer to follow:
/// a thread taking one lock in a loop finds it at a fixed offset of the thread-local),
/// the others in a list (a thread uses few sites; a short scan beats hashing).
pub(super) struct Sites {
    hot: Option<(Key, Local)>,
    rest: Vec<(Key, Local)>,
}

std::thread_local! {
    static LOCAL: std::cell::RefCell<Sites> = const {
        std::cell::RefCell::new(Sites { hot: None, rest: Vec::new() })
    };
}

/// The site of a lock's name or of a call site, registered on its first use anywhere
/// (`since`: when that use started, in ticks, if it was timed; else now).
#[cold]
fn site_for(who: Who, since: Option<u64>) -> Arc<Site> {
    let since = since.unwrap_or_else(ticks);
    let name = who.display();
    let mut reg = registry().lock().unwrap_or_else(PoisonError::into_inner);
    Arc::clone(reg.entry(name.clone()).or_insert_with(|| {
        Arc::new(Site {
            name,
            group: (crate::slot::WORDS_PER_LINE >= NAMES.len() + 2)
                .then(|| Arc::new(CounterGroup::new(NAMES, SHARDS))),
            overflow: CachePadded::new(Default::default()),
            hold_max: AtomicU64::new(0),
            wait_max: AtomicU64::new(0),
            since: AtomicU64::new(since),
        })
    }))
}

/// Records one use of the site of `key` that did not wait and was not timed: one count on
/// this thread's shard of the site it used last (the common case: a thread taking one lock
/// in a loop), or through [`record_slow`].
#[inline(always)]
pub(super) fn record_untimed(who: &Who) {
    let key = who.key();
    let fast = LOCAL.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else {
            return false;
        };
        match &mut l.hot {
            Some((
                k,
                Local {
                    handle: Some(h), ..
                },
            )) if *k == key => {
                h.add(TOTAL, 1);
                true
            }
            _ => false,
        }
    });
    if fast != Ok(true) {
        let mut d = [0u64; FIELDS];
        d[TOTAL] = 1;
        record_slow(*who, d, None);
    }
}

/// Records one use of the site of `key`: on this thread's shard of the site it used last
/// (the common case: a thread taking one lock in a loop; inlined, so an untimed use costs
/// one counter update), or through [`record_slow`].
#[inline(always)]
pub(super) fn record(who: Who, deltas: [u64; FIELDS], timed: Option<Timed>) {
    let key = who.key();
    let fast = LOCAL.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else {
            return false;
        };
        match &mut l.hot {
            Some((k, e)) if *k == key => {
                e.site.record(e.handle.as_mut(), deltas, timed);
                true
            }
            _ => false,
        }
    });
    if fast != Ok(true) {
        record_slow(who, deltas, timed);
    }
}

/// Records one use of the site of `key`: finds (or registers) the site, makes it this
/// thread's most recent one.
#[inline(never)]
fn record_slow(who: Who, deltas: [u64; FIELDS], timed: Option<Timed>) {
    let key = who.key();
    // `try_with`: a lock used while this thread's locals are being destroyed is still
    // counted, on the shared overflow counters.
    let done = LOCAL.try_with(|l| {
        // Re-entered (a metered lock used by code that `record` itself calls into, such
        // as a global allocator): counted on the shared counters instead.
        let Ok(mut l) = l.try_borrow_mut() else {
            return false;
        };
        let l = &mut *l;
        if !matches!(&l.hot, Some((k, _)) if *k == key) {
            let entry = match l.rest.iter().position(|(k, _)| *k == key) {
                Some(i) => l.rest.swap_remove(i),
                None => {
                    let site = site_for(who, timed.map(|t| t.began));
                    let handle = site.group.as_ref().and_then(|g| g.try_handle().ok());
                    (key, Local { site, handle })
                }
            };
            if let Some(old) = l.hot.replace(entry) {
                l.rest.push(old);
            }
        }
        if let Some((_, e)) = &mut l.hot {
            e.site.record(e.handle.as_mut(), deltas, timed);
        }
        true
    });
    if done != Ok(true) {
        site_for(who, timed.map(|t| t.began)).record(None, deltas, timed);
    }
}
