//! The CLI's stdout and stderr as files in the run directory (`run.output_capture = "files"`),
//! against a stand-in that loses its tail on a pipe the way Claude Code and OpenCode do.

use std::io::Read;
use std::path::Path;

use corral_engine::{EngineConfig, OutputCapture, RawStreamRetention};
use corral_ports::{Outcome, ProviderError, Usage};

use crate::support::*;

/// 4 MiB: far more than a pipe holds, so the stand-in always loses its tail on one.
const REPLY: &str = "4194304";

fn gunzip(path: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut bytes)
        .unwrap();
    bytes
}

#[tokio::test]
async fn a_cli_that_drops_its_pipe_tail_loses_nothing_through_the_stream_files() {
    let s = Scratch::new();
    let out = s
        .run_fake(
            "drops-pipe-tail",
            &["--session-id", "tail-1", "--bytes", REPLY],
        )
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(out.session_id.as_ref().map(|s| s.as_str()), Some("tail-1"));
    assert_eq!(
        out.usage,
        Usage {
            input: Some(10),
            output: Some(5),
            cost_usd: Some(0.001),
            ..Usage::default()
        }
    );
    assert_eq!(out.final_text.map(|t| t.len()), Some(4_194_304));
    let log = s.assert_log_complete("succeeded");
    let files = records(&log, "stream_files");
    assert_eq!(files.len(), 1);
    assert_eq!(files[0]["follow"], "inotify");
    assert!(
        files[0]["stdout"]
            .as_str()
            .unwrap()
            .ends_with("raw/1.stdout"),
        "{}",
        files[0]
    );
    // By default the raw stream is compressed after the run; it holds every byte the CLI wrote.
    let retained = records(&log, "raw_streams");
    assert_eq!(retained[0]["retention"], "compress");
    let raw = s.run_dir().join("raw");
    assert!(!raw.join("1.stdout").exists());
    let stdout = gunzip(&raw.join("1.stdout.gz"));
    assert_eq!(
        retained[0]["files"][0]["bytes"].as_u64(),
        Some(stdout.len() as u64)
    );
    let last = stdout
        .trim_ascii_end()
        .rsplit(|&b| b == b'\n')
        .next()
        .unwrap();
    let last: serde_json::Value = serde_json::from_slice(last).unwrap();
    assert_eq!(last["type"], "result");
    s.assert_tree_gone();
}

/// What the test above guards against: through a pipe the same stand-in loses its `result`, and
/// exit code 0 without it is a CLI failure, not a success.
#[tokio::test]
async fn through_pipes_the_same_cli_loses_its_terminal_event_and_does_not_succeed() {
    let s = Scratch::new();
    let config = EngineConfig {
        capture: OutputCapture::Pipes,
        ..fast_config()
    };
    let adapter = s.adapter(
        "drops-pipe-tail",
        &["--session-id", "tail-2", "--bytes", REPLY],
    );
    let err = run(config, &adapter, s.session()).await.unwrap_err();
    let ProviderError::Crashed { reason, .. } = &err else {
        panic!("not a crash: {err}");
    };
    assert!(
        reason.contains("exited 0 without its terminal event"),
        "{reason}"
    );
    assert_eq!(err.session_id().map(|s| s.as_str()), Some("tail-2"));
    let log = s.assert_log_complete("crashed");
    assert!(records(&log, "stream_files").is_empty());
    assert!(!s.run_dir().join("raw").exists());
    s.assert_tree_gone();
}

#[tokio::test]
async fn each_attempt_gets_its_own_pair_of_stream_files() {
    let s = Scratch::new();
    let state = s.path("state");
    let args = [
        "--times",
        "1",
        "--session-id",
        "rl-files",
        "--state-file",
        state.to_str().unwrap(),
    ];
    let config = EngineConfig {
        raw_streams: RawStreamRetention::Keep,
        ..fast_config()
    };
    let out = run(config, &s.adapter("rate-limit-then-ok", &args), s.session())
        .await
        .unwrap();
    assert_eq!(out.attempts, 2);
    let log = s.assert_log_complete("succeeded");
    let files: Vec<_> = records(&log, "stream_files")
        .iter()
        .map(|r| {
            (
                r["attempt"].as_u64(),
                r["stdout"].as_str().map(str::to_owned),
            )
        })
        .collect();
    let raw = s.run_dir().join("raw");
    let path = |name: &str| Some(raw.join(name).display().to_string());
    assert_eq!(
        files,
        [(Some(1), path("1.stdout")), (Some(2), path("2.stdout"))]
    );
    // Kept as written: the first attempt's rate limit, the second's result.
    let first = std::fs::read_to_string(raw.join("1.stdout")).unwrap();
    assert!(first.contains("rate_limit"), "{first}");
    let second = std::fs::read_to_string(raw.join("2.stdout")).unwrap();
    assert!(
        second.trim_end().ends_with('}') && second.contains("\"result\""),
        "{second}"
    );
    assert!(raw.join("1.stderr").exists() && raw.join("2.stderr").exists());
}

#[tokio::test]
async fn drop_on_success_removes_the_files_of_a_success_and_keeps_those_of_a_failure() {
    let config = EngineConfig {
        raw_streams: RawStreamRetention::DropOnSuccess,
        ..fast_config()
    };
    let ok = Scratch::new();
    run(config.clone(), &ok.adapter("ok", &[]), ok.session())
        .await
        .unwrap();
    let raw = ok.run_dir().join("raw");
    assert_eq!(std::fs::read_dir(&raw).unwrap().count(), 0, "{raw:?}");
    let log = ok.assert_log_complete("succeeded");
    assert_eq!(
        records(&log, "raw_streams")[0]["files"][0]["now"],
        serde_json::Value::Null
    );

    let failed = Scratch::new();
    let mut no_retry = config;
    no_retry.retry.max_retries = 0;
    run(
        no_retry,
        &failed.adapter("no-result", &[]),
        failed.session(),
    )
    .await
    .unwrap_err();
    let kept = std::fs::read_to_string(failed.run_dir().join("raw/1.stdout")).unwrap();
    assert!(kept.contains("hello"), "{kept}");
}
