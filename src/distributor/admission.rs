//! The admission hook of the atomic schedule: per packet, whether a routing pass places it
//! now, holds it back for a later pass, or exports it to another distributor (the
//! admission step in front of an eventdev port, as DPDK's `dsw` makes it per flow).
//!
//! A distributor on its own admits every packet ([`AdmitAll`], which compiles to nothing);
//! the multi-node layout's nodes hold back packets that must wait behind others queued at
//! the node and export reschedules of flows another node owns
//! ([`NodeAdmission`](crate::distributor::nodes::NodeAdmission)). The trait is sealed.

/// The admission of a distributor on its own: every packet is routed now. The default of
/// [`Atomic`](crate::distributor::Atomic)'s second parameter; users need not name it.
#[derive(Debug, Default, Clone, Copy)]
pub struct AdmitAll;

pub(in crate::distributor) mod sealed {
    /// The decisions of an admission (see the module docs). Calls are made with the
    /// schedule's own state consistent and no packet half-moved; none runs user code.
    pub trait Admitting<T> {
        /// Whether any input packet may be held back in this pass (asked once per pass,
        /// so that a pass that holds nothing runs the unfiltered loop).
        fn may_hold(&self) -> bool;

        /// A routing pass begins: forget what the last one held back.
        fn begin_pass(&mut self);

        /// The caller is the distributor's own `distribute`, not a node's step: nothing
        /// waits behind the node's queues.
        fn own_call(&mut self);

        /// Whether an input packet of tag `t` that arrived after poll `came` waits.
        fn holds_input(&self, t: u64, came: u64) -> bool;

        /// Whether a backlog packet of tag `t` read by poll `at` waits (noting that it
        /// did, for [`holds_input`](Self::holds_input)).
        fn holds_backlog(&mut self, t: u64, at: u64) -> bool;

        /// Takes `p` (tag `t`, read by poll `at`) if it belongs to another distributor;
        /// gives it back otherwise.
        fn try_export(&mut self, t: u64, p: T, at: u64) -> Option<T>;
    }
}

impl<T> sealed::Admitting<T> for AdmitAll {
    #[inline(always)]
    fn may_hold(&self) -> bool {
        false
    }

    #[inline(always)]
    fn begin_pass(&mut self) {}

    #[inline(always)]
    fn own_call(&mut self) {}

    #[inline(always)]
    fn holds_input(&self, _t: u64, _came: u64) -> bool {
        false
    }

    #[inline(always)]
    fn holds_backlog(&mut self, _t: u64, _at: u64) -> bool {
        false
    }

    #[inline(always)]
    fn try_export(&mut self, _t: u64, p: T, _at: u64) -> Option<T> {
        Some(p)
    }
}
