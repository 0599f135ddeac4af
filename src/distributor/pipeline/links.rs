//! Which stages each worker of a pipeline serves (its links, as an event device's port is
//! linked to queues), and the error of a link or priority call that names no such worker
//! or stage.

use core::fmt;

/// Per worker id, the stages it serves (bit `s` for stage `s`); a worker past the end
/// serves every stage (added at run time, not linked yet).
#[derive(Debug, Default)]
pub(super) struct Links {
    masks: Vec<u64>,
    /// Whether some worker serves less than every stage (otherwise routing looks at no
    /// link).
    restricted: bool,
}

impl Links {
    /// Whether every worker serves every stage.
    #[inline(always)]
    pub(super) fn all(&self) -> bool {
        !self.restricted
    }

    /// Whether worker `w` serves `stage`.
    #[inline(always)]
    pub(super) fn serves(&self, w: usize, stage: usize) -> bool {
        self.masks.get(w).map_or(true, |m| m & (1 << stage) != 0)
    }

    /// Worker `w` serves the stages of `mask` (of a pipeline whose stages are `every`).
    pub(super) fn set(&mut self, w: usize, mask: u64, every: u64) {
        if self.masks.len() <= w {
            self.masks.resize(w + 1, u64::MAX);
        }
        self.masks[w] = mask;
        self.restricted = self.masks.iter().any(|&m| m & every != every);
    }

    /// The stages worker `w` serves, of `n`.
    pub(super) fn of(&self, w: usize, n: usize) -> Vec<usize> {
        (0..n).filter(|&s| self.serves(w, s)).collect()
    }
}

/// A pipeline call that names a worker or a stage the pipeline does not have.
///
/// ```
/// use flowline::distributor::{self, Config, PipelineError, StageType};
/// let (mut d, _ws) = distributor::new_pipeline(
///     Config::default().workers(1).credit(8), &[StageType::Atomic], |p: &u64| (0, *p),
/// ).unwrap();
/// assert_eq!(d.link(5, &[0]), Err(PipelineError::NoSuchWorker(5)));
/// assert_eq!(d.link(0, &[1]), Err(PipelineError::NoSuchStage(1)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PipelineError {
    /// No worker with this id exists (never made, or removed).
    NoSuchWorker(usize),
    /// The pipeline has no stage with this index.
    NoSuchStage(usize),
}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipelineError::NoSuchWorker(w) => write!(f, "the pipeline has no worker {w}"),
            PipelineError::NoSuchStage(s) => write!(f, "the pipeline has no stage {s}"),
        }
    }
}

impl std::error::Error for PipelineError {}
