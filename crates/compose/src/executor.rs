//! The executor a parallel sprint's tasks run through, as `executor.kind` chooses.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use corral_executor_local::LocalExecutor;
use corral_executor_ray::{RayExecutor, RaySettings as RayExecutorSettings};
use corral_sprint::{ExecutorError, TaskExecutor};

use crate::settings::{ExecutorKind, Settings};

/// The local executor: also what `corral sprint work` hands its one-task run (which runs no
/// parallel task).
static LOCAL: LocalExecutor = LocalExecutor;

/// How often the ray executor reads a job's status and log.
const RAY_POLL: Duration = Duration::from_millis(500);

/// The environment variables a Ray job inherits from the coordinator: Corral's own
/// (`CORRAL_*`). Credentials and `PATH` of the workers are the cluster's (its nodes'
/// environment), or named here by prefix once a provider needs them passed.
const RAY_ENV_PREFIXES: &[&str] = &["CORRAL_"];

/// The executor `settings.executor` chooses, for the sprint file at `sprint_file` (a path
/// inside the project at `project_root`: a remote worker reads it from its clone).
///
/// # Errors
/// [`ExecutorError::Settings`] when `executor.kind` is `ray` and its settings are incomplete
/// or the sprint file is not inside the project.
pub fn task_executor(
    settings: &Settings,
    project_root: &Path,
    sprint_file: &Path,
) -> Result<Box<dyn TaskExecutor>, ExecutorError> {
    match settings.executor.kind {
        ExecutorKind::Local => Ok(Box::new(LocalExecutor)),
        ExecutorKind::Ray => ray_executor(settings, project_root, sprint_file),
    }
}

fn ray_executor(
    settings: &Settings,
    project_root: &Path,
    sprint_file: &Path,
) -> Result<Box<dyn TaskExecutor>, ExecutorError> {
    let ray = &settings.executor.ray;
    let missing = |key: &str, what: &str| ExecutorError::Settings {
        key: key.to_owned(),
        reason: format!("executor.kind is ray: set {key} ({what})"),
    };
    let address = ray
        .address
        .clone()
        .ok_or_else(|| missing("executor.ray.address", "the cluster's Jobs HTTP address"))?;
    let remote = ray
        .remote
        .clone()
        .ok_or_else(|| missing("executor.ray.remote", "a git remote the cluster reaches"))?;
    let sprint_file = repo_relative(project_root, sprint_file)?;
    // The workers run the same corral as the coordinator: on a cluster of this machine's
    // image, the same path.
    let corral = std::env::current_exe()
        .map_err(|e| ExecutorError::Settings {
            key: "executor.kind".to_owned(),
            reason: format!("cannot tell where this corral is, for the workers: {e}"),
        })?
        .to_string_lossy()
        .into_owned();
    let env_vars: BTreeMap<String, String> = std::env::vars()
        .filter(|(name, _)| RAY_ENV_PREFIXES.iter().any(|p| name.starts_with(p)))
        .collect();
    let executor = RayExecutor::new(RayExecutorSettings {
        address,
        remote,
        sprint_file,
        corral,
        entrypoint_num_cpus: ray.entrypoint_num_cpus,
        entrypoint_memory_mb: ray.entrypoint_memory_mb,
        max_resubmits: ray.max_resubmits,
        poll_interval: RAY_POLL,
        env_vars,
    })?;
    Ok(Box::new(executor))
}

/// `sprint_file` as a path inside the repository at `project_root`.
fn repo_relative(project_root: &Path, sprint_file: &Path) -> Result<String, ExecutorError> {
    let outside = |reason: String| ExecutorError::Settings {
        key: "executor.kind".to_owned(),
        reason: format!(
            "ray: the sprint file {} must be inside the project {}: {reason}",
            sprint_file.display(),
            project_root.display()
        ),
    };
    let file = std::fs::canonicalize(sprint_file).map_err(|e| outside(e.to_string()))?;
    let root = std::fs::canonicalize(project_root).map_err(|e| outside(e.to_string()))?;
    let relative = file
        .strip_prefix(&root)
        .map_err(|_| outside("it is not below it".to_owned()))?;
    Ok(relative.to_string_lossy().into_owned())
}

/// The local executor.
pub fn local_executor() -> &'static dyn TaskExecutor {
    &LOCAL
}
