//! The version answers of CLIs, kept per resolved binary, so that a run whose CLI did not change
//! does not start it once more just to ask `--version` (0.16 s of Node start-up for Claude Code,
//! seconds for some CLIs on a busy machine).
//!
//! A binary is known by its canonical path (a symlink such as npm's `claude` resolves to the file
//! that changes on an upgrade), the probe's arguments, its size and its modification time; any
//! change asks again. The file is written atomically, read within a size limit, and a file that
//! does not parse is ignored with a warning (and rewritten by the next probe). Only versions that
//! were found are kept: a timeout or an unparsed answer is asked again next time.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

/// The cache file's name under the user's cache directory (`$XDG_CACHE_HOME/corral/` or
/// `~/.cache/corral/`).
pub const VERSION_CACHE_FILE: &str = "cli-versions.json";
/// A cache file larger than this is not read (it would be nobody's cache).
const MAX_CACHE_BYTES: u64 = 1024 * 1024;
/// The most binaries the file remembers; the oldest entries beyond it are dropped.
const MAX_ENTRIES: usize = 64;

/// The version cache of the user whose environment `ambient` is (see
/// [`crate::EngineConfig::ambient`]): `$XDG_CACHE_HOME/corral/...`, else
/// `$HOME/.cache/corral/...`; `None` when neither is set to an absolute path.
pub fn user_version_cache(ambient: &[(String, String)]) -> Option<PathBuf> {
    let absolute = |name: &str| {
        ambient
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| PathBuf::from(v))
            .filter(|p| p.is_absolute())
    };
    let base = absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache")))?;
    Some(base.join("corral").join(VERSION_CACHE_FILE))
}

/// One binary as the cache knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BinaryStamp {
    key: String,
    size: u64,
    mtime_ns: u128,
}

impl BinaryStamp {
    /// The stamp of `program` probed with `args`; `None` when it cannot be resolved or read.
    pub fn of(program: &Path, args: &[String]) -> Option<Self> {
        let canonical = fs::canonicalize(program).ok()?;
        let meta = fs::metadata(&canonical).ok()?;
        let mtime_ns = meta
            .modified()
            .ok()?
            .duration_since(UNIX_EPOCH)
            .ok()?
            .as_nanos();
        Some(BinaryStamp {
            key: format!("{} {}", canonical.display(), args.join(" ")),
            size: meta.len(),
            mtime_ns,
        })
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheFile {
    /// By binary (canonical path and probe arguments).
    binaries: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    size: u64,
    /// As a string: JSON numbers lose nanoseconds in most readers.
    #[serde(alias = "mtime_ns")]
    mtime_ns: String,
    version: String,
    /// When it was written (seconds since the epoch), to drop the oldest.
    #[serde(alias = "written_s")]
    written_s: u64,
}

/// The cache file's entries; an absent file is empty, an unreadable or corrupt one is empty with
/// a warning.
fn load(cache: &Path) -> CacheFile {
    let mut bytes = Vec::new();
    let read = fs::File::open(cache).and_then(|f| f.take(MAX_CACHE_BYTES).read_to_end(&mut bytes));
    match read {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return CacheFile::default(),
        Err(e) => {
            tracing::warn!(cache = %cache.display(), error = %e, "the CLI version cache cannot be read; asking the CLI");
            return CacheFile::default();
        }
    }
    match serde_json::from_slice(&bytes) {
        Ok(file) => file,
        Err(e) => {
            tracing::warn!(cache = %cache.display(), error = %e, "the CLI version cache is corrupt; ignored, asking the CLI");
            CacheFile::default()
        }
    }
}

/// The version remembered for `stamp`, if the binary is unchanged since.
pub(crate) fn cached(cache: &Path, stamp: &BinaryStamp) -> Option<semver::Version> {
    let file = load(cache);
    let entry = file.binaries.get(&stamp.key)?;
    if entry.size != stamp.size || entry.mtime_ns != stamp.mtime_ns.to_string() {
        return None;
    }
    match semver::Version::parse(&entry.version) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(cache = %cache.display(), error = %e, "a CLI version cache entry is corrupt; ignored");
            None
        }
    }
}

/// Remembers `version` for `stamp`. A cache that cannot be written is a warning: the next run
/// asks the CLI again.
pub(crate) fn remember(cache: &Path, stamp: &BinaryStamp, version: &semver::Version) {
    let mut file = load(cache);
    let written_s = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    file.binaries.insert(
        stamp.key.clone(),
        Entry {
            size: stamp.size,
            mtime_ns: stamp.mtime_ns.to_string(),
            version: version.to_string(),
            written_s,
        },
    );
    while file.binaries.len() > MAX_ENTRIES {
        let oldest = file
            .binaries
            .iter()
            .min_by_key(|(_, e)| e.written_s)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(key) => file.binaries.remove(&key),
            None => break,
        };
    }
    let written = serde_json::to_vec_pretty(&file)
        .map_err(std::io::Error::other)
        .and_then(|json| {
            if let Some(dir) = cache.parent() {
                fs::create_dir_all(dir)?;
            }
            crate::files::write_atomic(cache, &json)
        });
    if let Err(e) = written {
        tracing::warn!(cache = %cache.display(), error = %e, "cannot write the CLI version cache");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("cli");
        fs::write(&path, body).unwrap();
        path
    }

    #[test]
    fn the_user_cache_follows_xdg_then_home() {
        let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            user_version_cache(&env(&[("HOME", "/h"), ("XDG_CACHE_HOME", "/x")])),
            Some(PathBuf::from("/x/corral").join(VERSION_CACHE_FILE))
        );
        assert_eq!(
            user_version_cache(&env(&[("HOME", "/h"), ("XDG_CACHE_HOME", "rel")])),
            Some(PathBuf::from("/h/.cache/corral").join(VERSION_CACHE_FILE))
        );
        assert_eq!(user_version_cache(&env(&[])), None);
    }

    #[test]
    fn a_remembered_version_is_found_until_the_binary_changes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("c/versions.json");
        let cli = script(dir.path(), "one");
        let stamp = BinaryStamp::of(&cli, &["--version".into()]).unwrap();
        assert_eq!(cached(&cache, &stamp), None);
        let v = semver::Version::new(2, 1, 197);
        remember(&cache, &stamp, &v);
        assert_eq!(cached(&cache, &stamp), Some(v));
        let other_args = BinaryStamp::of(&cli, &["-V".into()]).unwrap();
        assert_eq!(cached(&cache, &other_args), None, "other probe arguments");
        script(dir.path(), "a longer one");
        let changed = BinaryStamp::of(&cli, &["--version".into()]).unwrap();
        assert_ne!(changed, stamp);
        assert_eq!(
            cached(&cache, &changed),
            None,
            "a changed binary asks again"
        );
    }

    #[test]
    fn a_corrupt_cache_is_ignored_and_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("versions.json");
        fs::write(&cache, "{ not json").unwrap();
        let cli = script(dir.path(), "x");
        let stamp = BinaryStamp::of(&cli, &[]).unwrap();
        assert_eq!(cached(&cache, &stamp), None);
        let v = semver::Version::new(1, 0, 0);
        remember(&cache, &stamp, &v);
        assert_eq!(cached(&cache, &stamp), Some(v));
    }

    #[test]
    fn the_file_keeps_at_most_its_limit_of_binaries() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("versions.json");
        let cli = script(dir.path(), "x");
        let v = semver::Version::new(1, 0, 0);
        for i in 0..MAX_ENTRIES + 5 {
            let stamp = BinaryStamp::of(&cli, &[format!("--v{i}")]).unwrap();
            remember(&cache, &stamp, &v);
        }
        assert_eq!(load(&cache).binaries.len(), MAX_ENTRIES);
    }
}
