//! The count of a ring end's shared-line traffic: the index stores it published and the
//! loads of the other end's index that found it moved (each a transfer of that line to
//! this core). Counted in unit tests and under `--cfg flowline_lines` (the distributor's
//! line-count benchmark); otherwise the counter has no fields and its calls compile to
//! nothing, so the hot paths carry no `cfg`.

/// Line traffic of one ring end (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LineCounter {
    #[cfg(any(test, flowline_lines))]
    stores: usize,
    #[cfg(any(test, flowline_lines))]
    fresh_loads: usize,
}

impl LineCounter {
    /// The end stored its index.
    #[inline(always)]
    pub(crate) fn stored(&mut self) {
        #[cfg(any(test, flowline_lines))]
        {
            self.stores += 1;
        }
    }

    /// The end loaded the other end's index, which had `moved` since its last load.
    #[inline(always)]
    pub(crate) fn loaded(&mut self, moved: bool) {
        #[cfg(any(test, flowline_lines))]
        {
            self.fresh_loads += usize::from(moved);
        }
        #[cfg(not(any(test, flowline_lines)))]
        let _ = moved;
    }

    /// Index stores so far.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn stores(&self) -> usize {
        self.stores
    }

    /// `(stores, loads that found the index moved)` so far: `None` when not counted.
    #[cfg(all(feature = "std", feature = "__test_hooks"))]
    pub(crate) fn counts(&self) -> Option<(usize, usize)> {
        #[cfg(flowline_lines)]
        {
            Some((self.stores, self.fresh_loads))
        }
        #[cfg(not(flowline_lines))]
        None
    }
}
