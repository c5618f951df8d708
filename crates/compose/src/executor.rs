//! The executor a parallel sprint's tasks run through, as `executor.kind` chooses.

use corral_executor_local::LocalExecutor;
use corral_sprint::{ExecutorError, TaskExecutor};

use crate::settings::{ExecutorKind, Settings};

/// The local executor: also what `corral sprint work` hands its one-task run (which runs no
/// parallel task).
static LOCAL: LocalExecutor = LocalExecutor;

/// The executor `settings.executor` chooses.
pub fn task_executor(settings: &Settings) -> Result<&'static dyn TaskExecutor, ExecutorError> {
    match settings.executor.kind {
        ExecutorKind::Local => Ok(&LOCAL),
        ExecutorKind::Ray => Err(ExecutorError::Settings {
            key: "executor.kind".to_string(),
            reason: "ray: this corral has no Ray executor built in yet (use local)".to_string(),
        }),
    }
}

/// The local executor.
pub fn local_executor() -> &'static dyn TaskExecutor {
    &LOCAL
}
