//! How an execution ended, and what happened during it, as the engine is told.

use crate::store::logstore::OutputKind;
use crate::store::state::RunStatus;

/// Something that happened during a run, for the run's log.
#[derive(Debug)]
pub enum RunEvent<'a> {
    /// A line of svc's own text.
    Line(String),
    /// Bytes of command output or response body.
    Output(OutputKind, &'a [u8]),
    /// The HTTP status a JobHttp got.
    HttpStatus(u16),
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub success: bool,
    pub summary: String,
    /// What the runner reported of the end, beyond success.
    pub detail: EndDetail,
}

/// The facts of a run's end that its history keeps: whether its time ran out, and the
/// exit of its last command or the status of its HTTP call. (Whether it was cancelled
/// is the engine's to say: it asked.)
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndDetail {
    /// Ended because its time limit ran out.
    pub timed_out: bool,
    /// Exit code of the last command that ran, when it exited by itself.
    pub exit_code: Option<i32>,
    /// Signal that ended the last command that ran.
    pub signal: Option<i32>,
    /// Status of a JobHttp's response.
    pub http_status: Option<u16>,
    /// What the run's processes used, as its runner measured it. Boxed: a run's task
    /// holds an end while it waits, and its size is bounded (`engine::task_sizes`).
    pub usage: Option<Box<proto::ResourceUsage>>,
    /// The kernel killed a process of the run at its memory limit, and the run failed.
    pub oom: bool,
}

impl Outcome {
    pub fn fail(summary: impl Into<String>) -> Outcome {
        Outcome {
            success: false,
            summary: summary.into(),
            detail: EndDetail::default(),
        }
    }

    /// The end as a status: a failure told apart as a time limit, or as a cancellation
    /// when the engine asked for one (`cancel_asked`: cancel, replace, shutdown).
    pub fn status(&self, cancel_asked: bool) -> RunStatus {
        if self.success {
            RunStatus::Success
        } else if self.detail.timed_out {
            RunStatus::Timeout
        } else if cancel_asked {
            RunStatus::Canceled
        } else {
            RunStatus::Fail
        }
    }
}
