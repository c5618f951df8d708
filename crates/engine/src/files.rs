//! Files the engine writes for a run: atomic writes, the session id file, prompt pointer files.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use corral_ports::SessionId;
use corral_ports::run_dir::{SESSION_ID_FILE, SESSION_META_FILE};
use serde::Serialize;

/// Writes `contents` to `path` atomically: a temporary file in the same directory, then renamed
/// over the target. A reader sees the old file or the new one, never half of one, and a killed
/// supervisor leaves a whole file. It is not forced to disk (no fsync): the session id must be
/// there for the next process, which the page cache guarantees, and an fsync on the run's hot
/// path costs milliseconds on a busy disk.
pub fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default();
    // Through the one handle on the host's files (`corral-hostfs`): the new file is created
    // exclusively beside the old one and renamed over it. A link, FIFO or second hard link an
    // agent planted at the name (the native backend has no bind to stop it) is replaced, never
    // written through, and named in the diagnostics.
    let displaced = corral_hostfs::HostDir::open(dir)
        .and_then(|d| d.supersede(name, contents))
        .map_err(host_error)?;
    if let Some(found) = displaced {
        tracing::warn!(file = %path.display(), found, "a record file was replaced over something planted at its name (tampering)");
    }
    Ok(())
}

/// A host file error as the `io::Error` the engine's writers return: the same kind where there
/// is one (a full disk stays `StorageFull`, a missing directory `NotFound`).
fn host_error(error: corral_hostfs::HostFsError) -> io::Error {
    match error {
        corral_hostfs::HostFsError::Io { source, .. } => source,
        corral_hostfs::HostFsError::Missing { .. } => {
            io::Error::new(io::ErrorKind::NotFound, error.to_string())
        }
        corral_hostfs::HostFsError::Tampered { .. }
        | corral_hostfs::HostFsError::TooLarge { .. }
        | corral_hostfs::HostFsError::BadName { .. } => {
            io::Error::new(io::ErrorKind::InvalidData, error.to_string())
        }
    }
}

/// What is recorded beside `session-id.txt`: a Claude session can only be resumed from the
/// working directory it was made in, a crash resume must ask for the model the session was
/// made with (a resumed conversation on another model is not the same agent), and the CLI
/// version explains a later refusal.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// The session id.
    #[serde(alias = "session_id")]
    pub session_id: SessionId,
    /// The provider that made it.
    pub provider: String,
    /// The model the session was asked for, in the provider's spelling; `None`: the CLI's
    /// default (a record written before the model was recorded reads as `None` too).
    #[serde(default)]
    pub model: Option<String>,
    /// The working directory to resume from.
    pub cwd: PathBuf,
    /// The CLI version, when it was checked.
    #[serde(alias = "cli_version")]
    pub cli_version: Option<String>,
    /// The attempt that reported it.
    pub attempt: u32,
}

/// The copy beside a record file that [`write_record_file`] writes first (see
/// [`corral_ports::run_dir::record_copy`]).
pub use corral_ports::run_dir::record_copy;

/// Serialises the in-place writes: two of them at once to one file would mix.
static IN_PLACE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `path` opened for writing when it is a plain file with one link, without following a
/// symbolic link or blocking on a FIFO; `None` otherwise (missing, a link, a device, a FIFO, a
/// hard link that may have another name elsewhere).
fn open_plain(path: &Path) -> Option<fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    (meta.is_file() && meta.nlink() == 1).then_some(file)
}

/// Writes a record file in place, keeping its inode, when it and its [`record_copy`] are both
/// there as plain files; `None` (nothing written) otherwise. A rename over a file that is a
/// bind mount point in a live sandbox's namespace would detach that bind and leave the agent a
/// writable file in its place; writing through the open file leaves the bind as it is. The new
/// version goes to the copy first (forced to disk), then over the file (forced to disk): a
/// reader that finds the file cut short takes the copy.
fn write_in_place(path: &Path, contents: &[u8]) -> Option<io::Result<()>> {
    use std::os::unix::fs::FileExt;
    let _guard = match IN_PLACE.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    let copy = open_plain(&record_copy(path))?;
    let file = open_plain(path)?;
    let len = contents.len() as u64;
    Some((|| {
        copy.write_all_at(contents, 0)?;
        copy.set_len(len)?;
        copy.sync_data()?;
        file.write_all_at(contents, 0)?;
        file.set_len(len)?;
        file.sync_data()
    })())
}

/// Writes a file of a run's record: in place when Corral bound it read-only into a sandbox
/// (its [`record_copy`] is there, see `write_in_place`), else atomically (see
/// [`write_atomic`]). Tries once more when the first try failed on a full disk (after freeing
/// the run directory's reserve, see [`crate::reserve::release_reserve`]) or because the directory
/// is gone (after recreating it): the files of a run's record are the last thing to lose.
pub fn write_record_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let written = write_in_place(path, contents).unwrap_or_else(|| write_atomic(path, contents));
    match written {
        Err(e)
            if e.kind() == io::ErrorKind::StorageFull && crate::reserve::release_reserve(dir) =>
        {
            write_record_file(path, contents)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dir)?;
            write_atomic(path, contents)
        }
        other => other,
    }
}

/// Persists a session id (`session-id.txt`, one line) and its metadata (`session.json`).
pub fn persist_session(dir: &Path, meta: &SessionMeta) -> io::Result<PathBuf> {
    let path = dir.join(SESSION_ID_FILE);
    write_record_file(&path, format!("{}\n", meta.session_id).as_bytes())?;
    let json = serde_json::to_vec_pretty(meta).map_err(io::Error::other)?;
    write_record_file(&dir.join(SESSION_META_FILE), &json)?;
    Ok(path)
}

/// A fresh random version-4 UUID as a session id, for CLIs that accept an id minted up front
/// (`claude --session-id`, `copilot --session-id`). Ids need to be unique, not secret.
pub fn mint_session_uuid() -> SessionId {
    loop {
        let mut bytes = fastrand::u128(..).to_be_bytes();
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let text = format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        );
        // Hex digits and dashes are always accepted; the loop only makes that total.
        if let Ok(id) = SessionId::new(text) {
            return id;
        }
    }
}

/// A prompt written to a file, and the one-line sentence that points the CLI at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptPointer {
    /// The prompt file (absolute when `dir` was).
    pub path: PathBuf,
    /// The sentence to pass as the CLI's prompt argument.
    pub sentence: String,
}

/// Writes the prompt to `dir/file_name` atomically and returns the pointer sentence. Used where a
/// CLI takes the prompt only as an argument (Copilot `-p`, Grok `-p`) and for interactive
/// handoffs, so the body never enters argv.
pub fn write_prompt_pointer(
    dir: &Path,
    file_name: &str,
    prompt: &str,
) -> io::Result<PromptPointer> {
    fs::create_dir_all(dir)?;
    let path = dir.join(file_name);
    write_atomic(&path, prompt.as_bytes())?;
    let sentence = format!(
        "Your complete task is in the file {}. Read that file and follow its instructions exactly.",
        path.display()
    );
    Ok(PromptPointer { path, sentence })
}

/// A file of a run directory that was not what Corral leaves there, removed by
/// [`repair_run_dir`] so that Corral, and the resumed agent, write a fresh one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tampered {
    /// Where.
    pub path: PathBuf,
    /// What it was: `a FIFO`, `a symbolic link`, `a directory`, `a socket`, `a device`,
    /// `a hard link` (a regular file with another name, perhaps outside the run directory).
    pub was: &'static str,
}

/// Removes, before a run resumes a session in `output_dir` (a corrective retry, `corral
/// resume`), what an agent left in place of `signals_file` and of Corral's record files
/// (`sandbox::record_paths`) that is not a plain file with one link (`raw/`: not a
/// directory), and returns what it removed, for the run's record. Left in place, a FIFO as
/// `signals.json` blocked the resumed agent's write until the idle watchdog ended the run, one
/// as `events.jsonl` blocked Corral's own log, and a symbolic link or a hard link sent the next
/// write somewhere else. A symbolic link is removed, never what it points to.
pub fn repair_run_dir(output_dir: &Path, signals_file: &Path) -> Vec<Tampered> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let raw = output_dir.join(crate::streams::RAW_STREAMS_DIR);
    let mut candidates = vec![signals_file.to_path_buf()];
    candidates.extend(corral_sandbox::record_paths(output_dir));
    let mut removed = Vec::new();
    for path in candidates {
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let kind = meta.file_type();
        let was = if kind.is_symlink() {
            "a symbolic link"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_block_device() || kind.is_char_device() {
            "a device"
        } else if kind.is_dir() {
            if path == raw {
                continue;
            }
            "a directory"
        } else if path == raw {
            "not a directory"
        } else if meta.nlink() > 1 {
            "a hard link"
        } else {
            continue;
        };
        let gone = if kind.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match gone {
            Ok(()) => removed.push(Tampered { path, was }),
            Err(e) => tracing::warn!(
                path = %path.display(),
                was,
                error = %e,
                "cannot remove what the agent left in the run directory"
            ),
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_file_holds_the_prompt_and_the_sentence_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let prompt = "line one\nline two\n".repeat(10_000);
        let pointer = write_prompt_pointer(dir.path(), "copilot-prompt.md", &prompt).unwrap();
        assert_eq!(fs::read_to_string(&pointer.path).unwrap(), prompt);
        assert!(
            pointer
                .sentence
                .contains(&pointer.path.display().to_string())
        );
        assert!(!pointer.sentence.contains('\n'));
        assert!(pointer.sentence.len() < 512);
    }

    #[test]
    fn minted_uuids_are_version_4_and_distinct() {
        let a = mint_session_uuid();
        let b = mint_session_uuid();
        assert_ne!(a, b);
        let s = a.as_str();
        assert_eq!(s.len(), 36);
        assert_eq!(&s[14..15], "4");
        assert!(matches!(&s[19..20], "8" | "9" | "a" | "b"), "{s}");
    }

    #[test]
    fn session_files_are_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let meta = SessionMeta {
            session_id: SessionId::new("abc-123").unwrap(),
            provider: "claude".into(),
            model: Some("claude-sonnet-4-5".into()),
            cwd: "/work".into(),
            cli_version: Some("2.1.197".into()),
            attempt: 1,
        };
        persist_session(dir.path(), &meta).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(SESSION_ID_FILE)).unwrap(),
            "abc-123\n"
        );
        let back: SessionMeta =
            serde_json::from_slice(&fs::read(dir.path().join(SESSION_META_FILE)).unwrap()).unwrap();
        assert_eq!(back, meta);
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    fn inode(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        fs::symlink_metadata(path).unwrap().ino()
    }

    /// A record file bound into a live sandbox must keep its inode (a rename over the bind
    /// mount point would detach it there): with its copy beside it, it is written in place,
    /// shorter or longer, the copy holding the same.
    #[test]
    fn a_record_file_with_its_copy_is_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        fs::write(&path, "{\"old\": \"a longer first version\"}\n").unwrap();
        fs::write(record_copy(&path), "").unwrap();
        assert_eq!(record_copy(&path), dir.path().join(".run.json.next"));
        // What a bind of the file sees: the inode opened before the writes (held open, so its
        // number cannot be reused by a replacement).
        let bound = fs::File::open(&path).unwrap();
        let seen = || {
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut &bound, &mut text).unwrap();
            std::io::Seek::rewind(&mut &bound).unwrap();
            text
        };
        let before = (inode(&path), inode(&record_copy(&path)));
        write_record_file(&path, b"{\"new\": 1}\n").unwrap();
        assert_eq!(seen(), b"{\"new\": 1}\n");
        write_record_file(&path, &b"x".repeat(20_000)).unwrap();
        assert_eq!(seen(), b"x".repeat(20_000));
        assert_eq!(fs::read(&path).unwrap(), b"x".repeat(20_000));
        assert_eq!((inode(&path), inode(&record_copy(&path))), before);
        assert_eq!(fs::read(record_copy(&path)).unwrap(), b"x".repeat(20_000));
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temporary file"
        );
    }

    /// Without the copy (no sandbox binds it), or when the file is not a plain file of one link
    /// (a symbolic or hard link the agent put there under the native backend), the file is
    /// replaced by a rename: nothing is written through to where a link points.
    #[test]
    fn without_its_copy_or_over_a_link_a_record_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session-id.txt");
        fs::write(&path, "old\n").unwrap();
        let old = fs::File::open(&path).unwrap();
        write_record_file(&path, b"new\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut &old, &mut text).unwrap();
        assert_eq!(text, "old\n", "replaced, not written in place");

        fs::write(record_copy(&path), "").unwrap();
        let outside = dir.path().join("outside");
        fs::write(&outside, "mine\n").unwrap();
        fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        write_record_file(&path, b"id\n").unwrap();
        assert!(fs::symlink_metadata(&path).unwrap().is_file());
        fs::remove_file(&path).unwrap();
        fs::hard_link(&outside, &path).unwrap();
        write_record_file(&path, b"id\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "id\n");
        assert_eq!(fs::read_to_string(&outside).unwrap(), "mine\n");
    }

    /// Issue 29 item 3: what an agent leaves in place of `signals.json` or a record file (a
    /// FIFO, a link, a directory, a hard link) is removed before a resume; a plain file, the
    /// `raw/` directory and what a link points to stay.
    #[test]
    fn tampered_run_files_are_removed_and_plain_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        std::fs::create_dir_all(out.join("raw")).unwrap();
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "keep\n").unwrap();
        let signals = out.join("signals.json");
        nix::unistd::mkfifo(&signals, nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::os::unix::fs::symlink(&outside, out.join("run.json")).unwrap();
        std::fs::create_dir_all(out.join("session-id.txt/x")).unwrap();
        std::fs::hard_link(&outside, out.join("prompt.md")).unwrap();
        std::fs::write(out.join("events.jsonl"), "{}\n").unwrap();
        let mut removed = repair_run_dir(&out, &signals);
        removed.sort_by(|a, b| a.path.cmp(&b.path));
        let names: Vec<(String, &str)> = removed
            .iter()
            .map(|t| {
                let name = t.path.file_name().unwrap().to_string_lossy().into_owned();
                (name, t.was)
            })
            .collect();
        assert_eq!(
            names,
            [
                ("prompt.md".to_string(), "a hard link"),
                ("run.json".to_string(), "a symbolic link"),
                ("session-id.txt".to_string(), "a directory"),
                ("signals.json".to_string(), "a FIFO"),
            ]
        );
        for t in &removed {
            assert!(std::fs::symlink_metadata(&t.path).is_err(), "{t:?}");
        }
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep\n");
        assert!(out.join("raw").is_dir() && out.join("events.jsonl").is_file());
        assert_eq!(repair_run_dir(&out, &signals), []);
    }

    #[test]
    fn a_session_record_without_a_model_reads_as_the_cli_default() {
        let old = r#"{"session_id":"abc-123","provider":"claude","cwd":"/work","cli_version":null,"attempt":1}"#;
        let back: SessionMeta = serde_json::from_str(old).unwrap();
        assert_eq!(back.model, None);
    }
}
