//! Bounded commands (git, the version probe, the model probes): both pipes are read at once,
//! the output kept is capped, and a command that outlives its limit goes down with its whole
//! process group, keeping what it printed until then.

use std::ffi::OsString;
use std::time::Duration;

use corral_engine::{
    BoundedCommand, BoundedEnd, SpawnRequest, StdinMode, TokioSpawner, VersionProbe, probe_version,
    run_bounded,
};
use corral_test_support::probe::write_script;
use corral_test_support::{read_pids, wait_all_dead};

fn request(program: std::path::PathBuf, cwd: &std::path::Path) -> SpawnRequest {
    SpawnRequest {
        program,
        args: Vec::new(),
        env: vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))],
        cwd: cwd.to_path_buf(),
        stdin: StdinMode::Null,
        parent_death_signal: true,
        inherit_fds: Vec::new(),
        output: corral_engine::ChildOutputs::Pipes,
        pre_exec: Vec::new(),
    }
}

/// A CLI that fills its stderr pipe before it prints its version used to stall the probe, which
/// read stdout to its end first, until the timeout.
#[tokio::test]
async fn a_cli_that_floods_stderr_first_still_reports_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let cli = write_script(
        dir.path(),
        "chatty-cli",
        "head -c 1048576 /dev/zero | tr '\\0' 'e' >&2\necho 'chatty-cli 1.2.3'\n",
    );
    let probe = probe_version(
        &TokioSpawner,
        &cli,
        &[],
        vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))],
        dir.path(),
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(probe, VersionProbe::Found(semver::Version::new(1, 2, 3)));
}

#[tokio::test]
async fn output_beyond_the_cap_is_counted_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let cli = write_script(
        dir.path(),
        "loud",
        "head -c 300000 /dev/zero | tr '\\0' 'o'\nhead -c 5000 /dev/zero | tr '\\0' 'e' >&2\nexit 3\n",
    );
    let command = BoundedCommand {
        stdout_limit: 1000,
        stderr_limit: 100_000,
        ..BoundedCommand::limited(request(cli, dir.path()), Duration::from_secs(20))
    };
    let out = run_bounded(&TokioSpawner, &command).await.unwrap();
    let BoundedEnd::Exited(exit) = out.end else {
        panic!("{:?}", out.end);
    };
    assert_eq!(exit.code, Some(3));
    assert_eq!((out.stdout.bytes.len(), out.stdout.total), (1000, 300_000));
    assert!(out.stdout.truncated());
    assert_eq!((out.stderr.bytes.len(), out.stderr.total), (5000, 5000));
    assert!(!out.stderr.truncated());
}

#[tokio::test]
async fn a_command_past_its_limit_is_killed_with_its_group_and_keeps_what_it_printed() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let cli = write_script(
        dir.path(),
        "hang",
        &format!(
            "sleep 600 &\necho $$ > '{p}'\necho $! >> '{p}'\necho started\nwait\n",
            p = pids.display()
        ),
    );
    let command = BoundedCommand::limited(request(cli, dir.path()), Duration::from_millis(500));
    let out = run_bounded(&TokioSpawner, &command).await.unwrap();
    assert_eq!(out.end, BoundedEnd::TimedOut);
    assert_eq!(out.stdout.text(), "started\n");
    let pids = read_pids(&pids);
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert!(
        wait_all_dead(&pids, Duration::from_secs(5)).is_empty(),
        "the script and its sleep are gone"
    );
}
