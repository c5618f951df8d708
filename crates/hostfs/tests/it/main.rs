//! The host files' one integration binary: what an agent plants where Corral writes or reads.

// Test code: a failed expectation should panic loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use corral_hostfs::{EntryKind, HostDir, HostFsError};

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

#[test]
fn a_link_where_corral_replaces_a_file_is_tampering_and_its_target_is_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("bashrc");
    std::fs::write(&victim, "original\n").unwrap();
    let record = tmp.path().join("record");
    std::fs::create_dir(&record).unwrap();
    symlink(&victim, record.join("check.txt")).unwrap();
    let dir = HostDir::open(&record).unwrap();
    let err = dir.replace("check.txt", b"echo pwned\n").unwrap_err();
    assert!(err.is_tampering(), "{err}");
    assert!(err.to_string().contains("a symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original\n");
    // Appending and writing anew refuse it as well.
    assert!(dir.append("check.txt", b"x").unwrap_err().is_tampering());
    assert!(dir.write_new("check.txt", b"x").unwrap_err().is_tampering());
    assert!(dir.read("check.txt", 1024).unwrap_err().is_tampering());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original\n");
}

#[test]
fn a_link_in_a_directory_of_the_path_is_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tmp.path().join("home");
    std::fs::create_dir(&elsewhere).unwrap();
    let record = tmp.path().join("record");
    std::fs::create_dir_all(record.join("rounds")).unwrap();
    symlink(&elsewhere, record.join("rounds/2")).unwrap();
    let dir = HostDir::open(&record).unwrap();
    let err = dir.replace("rounds/2/diff.patch", b"x").unwrap_err();
    assert!(err.is_tampering(), "{err}");
    assert!(
        dir.create_dir("rounds/2/generator")
            .unwrap_err()
            .is_tampering()
    );
    assert!(dir.read("rounds/2/x", 10).unwrap_err().is_tampering());
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    // A fresh directory replaces the link, and leaves what it pointed at alone.
    let (fresh, existed) = dir.fresh_dir("rounds/2").unwrap();
    assert!(existed);
    assert!(
        std::fs::symlink_metadata(record.join("rounds/2"))
            .unwrap()
            .is_dir()
    );
    fresh.write_new("a", b"1").unwrap();
    assert!(elsewhere.exists());
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn a_hard_link_is_replaced_not_written_through_and_refused_for_appends() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("profile");
    std::fs::write(&victim, "original\n").unwrap();
    let record = tmp.path().join("record");
    std::fs::create_dir(&record).unwrap();
    std::fs::hard_link(&victim, record.join("learnings.ndjson")).unwrap();
    let dir = HostDir::open(&record).unwrap();
    let err = dir.append("learnings.ndjson", b"{}\n").unwrap_err();
    assert!(err.to_string().contains("another hard link"), "{err}");
    assert!(
        dir.replace("learnings.ndjson", b"{}\n")
            .unwrap_err()
            .is_tampering()
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original\n");
}

#[test]
fn a_fifo_never_blocks_a_read_or_a_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = HostDir::open(tmp.path()).unwrap();
    mkfifo(&tmp.path().join("signals.json"));
    assert!(dir.read("signals.json", 10).unwrap_err().is_tampering());
    assert!(dir.append("signals.json", b"x").unwrap_err().is_tampering());
    assert!(
        dir.replace("signals.json", b"x")
            .unwrap_err()
            .is_tampering()
    );
    assert_eq!(
        dir.kind("signals.json").unwrap(),
        Some(EntryKind::Other("a FIFO"))
    );
    dir.remove("signals.json").unwrap();
    assert_eq!(dir.kind("signals.json").unwrap(), None);
}

#[test]
fn files_are_written_replaced_appended_and_read_below_the_handle() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = HostDir::open(tmp.path()).unwrap();
    dir.write_new("a/b/new.txt", b"one").unwrap();
    assert!(
        dir.write_new("a/b/new.txt", b"two")
            .unwrap_err()
            .is_tampering()
    );
    dir.replace("a/b/new.txt", b"two").unwrap();
    dir.append("a/b/new.txt", b"+").unwrap();
    assert_eq!(dir.read("a/b/new.txt", 10).unwrap(), b"two+");
    assert!(matches!(
        dir.read("a/b/new.txt", 2),
        Err(HostFsError::TooLarge { .. })
    ));
    assert!(dir.read_if_exists("a/none", 2).unwrap().is_none());
    assert!(matches!(
        dir.replace("../escape", b"x"),
        Err(HostFsError::BadName { .. })
    ));
    // Only the file is there: the temporary file was renamed into place.
    let names = dir.dir("a/b").unwrap().entries().unwrap();
    assert_eq!(names, vec![std::ffi::OsString::from("new.txt")]);
    dir.rename("a/b/new.txt", "a/moved.txt").unwrap();
    assert_eq!(dir.read("a/moved.txt", 10).unwrap(), b"two+");
}

#[test]
fn removing_a_tree_never_follows_its_links() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep"), "x").unwrap();
    let record = tmp.path().join("record");
    std::fs::create_dir_all(record.join("t/rounds/1")).unwrap();
    symlink(&outside, record.join("t/rounds/1/link")).unwrap();
    std::fs::write(record.join("t/rounds/1/file"), "y").unwrap();
    // A read-only directory inside is still removed (its owner may write it).
    std::fs::set_permissions(
        record.join("t/rounds"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let dir = HostDir::open(&record).unwrap();
    dir.remove("t").unwrap();
    assert!(!record.join("t").exists());
    assert!(outside.join("keep").exists());
}

#[test]
fn superseding_replaces_what_was_planted_without_writing_through_it() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "mine\n").unwrap();
    let run = tmp.path().join("run");
    std::fs::create_dir(&run).unwrap();
    symlink(&victim, run.join("run.json")).unwrap();
    std::fs::hard_link(&victim, run.join("session-id.txt")).unwrap();
    mkfifo(&run.join("session.json"));
    let dir = HostDir::open(&run).unwrap();
    assert_eq!(
        dir.supersede("run.json", b"{}").unwrap(),
        Some("a symbolic link")
    );
    assert_eq!(
        dir.supersede("session-id.txt", b"id\n").unwrap(),
        Some("a file with another hard link")
    );
    assert_eq!(
        dir.supersede("session.json", b"{}").unwrap(),
        Some("a FIFO")
    );
    assert_eq!(dir.supersede("run.json", b"{}\n").unwrap(), None);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine\n");
    for name in ["run.json", "session-id.txt", "session.json"] {
        assert_eq!(dir.kind(name).unwrap(), Some(EntryKind::File), "{name}");
    }
}
