//! What refine, ideate and ready share before their agent runs: the project, its settings,
//! the sprint file (when there is one, checked as `sprint check` checks it), the sprint whose
//! record the flow is kept in, and the provider and model that run it.

use std::path::{Path, PathBuf};

use corral_compose::LoadedSettings;
use corral_ports::ProviderId;
use corral_sprint::life::SourceText;
use corral_sprint::{SprintFile, SprintName};

use super::plan::{new_sprint_name, sprint_file_path};
use crate::config_cmd::load_settings;
use crate::exit::Exit;
use crate::term::errln;

/// The project and sprint a flow works on.
pub(super) struct Target {
    /// The project's root, canonical.
    pub root: PathBuf,
    /// The settings.
    pub loaded: LoadedSettings,
    /// The sprint file's path (it may not exist).
    pub path: PathBuf,
    /// The sprint file, when it exists (a file with no tasks yet included).
    pub file: Option<SprintFile>,
}

impl Target {
    /// The project here and the sprint file `file` (default `corral-sprint.toml`): `Err` with
    /// the exit code once a sprint file with errors was reported as `sprint check` reports it.
    pub fn open(file: Option<&Path>, flow: &str) -> anyhow::Result<Result<Target, Exit>> {
        let cwd = std::fs::canonicalize(std::env::current_dir()?)?;
        let loaded = load_settings(&cwd, Vec::new())?;
        let root =
            std::fs::canonicalize(&loaded.project_root).unwrap_or(loaded.project_root.clone());
        let path = sprint_file_path(&cwd, &root, file)?;
        let file = if path.symlink_metadata().is_ok() {
            match crate::sprint::load_untasked_or_report(&path)? {
                Ok(file) => Some(file),
                Err(exit) => {
                    errln!(
                        "{}: fix these first (`corral sprint check`); {flow} did not start",
                        path.display()
                    );
                    return Ok(Err(exit));
                }
            }
        } else {
            None
        };
        Ok(Ok(Target {
            root,
            loaded,
            path,
            file,
        }))
    }

    /// The sprint the flow's record goes to: the sprint file's, else `--name`, else one made
    /// from the first source's file name, else `fallback`.
    pub fn sprint_name(
        &self,
        name: Option<&str>,
        sources: &[SourceText],
        fallback: &str,
    ) -> anyhow::Result<SprintName> {
        if let Some(file) = &self.file {
            return Ok(file.sprint.name.clone());
        }
        if name.is_none() && sources.is_empty() {
            return SprintName::new(fallback).map_err(|e| {
                crate::exit::usage(format!("no sprint name: {e}; give one with --name"))
            });
        }
        new_sprint_name(name, sources)
    }

    /// The provider and model: the flags, else the sprint file's generator's, else the
    /// settings' `run.provider` and its model.
    pub fn provider_model(
        &self,
        provider: Option<ProviderId>,
        model: Option<&str>,
    ) -> (ProviderId, Option<String>) {
        let role = self.file.as_ref().map(|f| &f.generator);
        let provider = provider
            .or(role.map(|r| r.provider))
            .unwrap_or(self.loaded.settings.run.provider);
        let model = model
            .map(str::to_owned)
            .or_else(|| {
                role.filter(|r| r.provider == provider)
                    .and_then(|r| r.model.clone())
            })
            .or_else(|| self.loaded.settings.providers.get(provider).model.clone());
        (provider, model)
    }
}

/// `path` relative to the project `root`, for the safe writes below it: it must be in the
/// project, its directory must exist, and a link anywhere on the way is refused by the write
/// itself.
pub(super) fn in_project(root: &Path, path: &Path) -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir()?;
    let named = cwd.join(path);
    let parent = named
        .parent()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .ok_or_else(|| {
            crate::exit::usage(format!("{}: its directory does not exist", path.display()))
        })?;
    let rel = parent.strip_prefix(root).map_err(|_| {
        crate::exit::usage(format!(
            "{}: is outside the project {} (a link out of the tree, or a path beyond it)",
            path.display(),
            root.display()
        ))
    })?;
    Ok(rel.join(named.file_name().unwrap_or_default()))
}
