//! `extract_tree`: a task's record brought back from a ref byte for byte, the repository's
//! own index and work tree untouched.

use std::path::Path;

use corral_ports::CancellationToken;
use corral_sprint::extract_tree;

use crate::flow::{git, runner};

/// Bytes no text capture keeps: a gzip header and invalid UTF-8.
const COMPRESSED: &[u8] = &[
    0x1f, 0x8b, 0x08, 0x00, 0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x0a,
];

#[tokio::test]
async fn a_records_files_come_back_byte_for_byte_and_the_repository_is_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    // A worker's clone makes the record: `implement/t1/` at its tree's top.
    let worker = tmp.path().join("worker");
    let raw = worker.join("implement/t1/rounds/1/generator/raw");
    std::fs::create_dir_all(&raw).unwrap();
    std::fs::write(raw.join("1.stdout.gz"), COMPRESSED).unwrap();
    std::fs::write(worker.join("implement/t1/task.json"), "{\"id\":\"t1\"}\n").unwrap();
    std::fs::write(worker.join("other.txt"), "not asked for\n").unwrap();
    git(&worker, &["init", "--quiet"]).await;
    git(&worker, &["add", "--all"]).await;
    git(&worker, &["commit", "--quiet", "-m", "record"]).await;

    // The coordinator's project, with a change staged and one not: both must stay as they are.
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("README"), "one\n").unwrap();
    git(&project, &["init", "--quiet"]).await;
    git(&project, &["add", "--all"]).await;
    git(&project, &["commit", "--quiet", "-m", "start"]).await;
    std::fs::write(project.join("README"), "two\n").unwrap();
    std::fs::write(project.join("staged.txt"), "staged\n").unwrap();
    git(&project, &["add", "staged.txt"]).await;
    let record = "refs/corral/s/t1/record";
    let from = format!("{}", worker.display());
    let refspec = format!("+HEAD:{record}");
    git(&project, &["fetch", "--quiet", &from, &refspec]).await;
    // As `corral sprint run` leaves it: the state directory ignored.
    std::fs::create_dir_all(project.join(".corral")).unwrap();
    std::fs::write(project.join(".corral/.gitignore"), "*\n").unwrap();
    let status_before = git(&project, &["status", "--porcelain"]).await;
    let index_before = std::fs::read(project.join(".git/index")).unwrap();

    let into = project.join(".corral/sprints/s");
    std::fs::create_dir_all(into.join("implement/t1")).unwrap();
    std::fs::write(into.join("implement/t1/job.log"), "kept\n").unwrap();
    extract_tree(
        &runner(),
        &project,
        &[],
        &CancellationToken::new(),
        record,
        "implement/t1/",
        &into,
    )
    .await
    .unwrap();

    let gz = into.join("implement/t1/rounds/1/generator/raw/1.stdout.gz");
    assert_eq!(std::fs::read(&gz).unwrap(), COMPRESSED, "{}", gz.display());
    assert_eq!(
        std::fs::read_to_string(into.join("implement/t1/task.json")).unwrap(),
        "{\"id\":\"t1\"}\n"
    );
    assert!(!into.join("other.txt").exists(), "only the path asked for");
    assert_eq!(
        std::fs::read_to_string(into.join("implement/t1/job.log")).unwrap(),
        "kept\n",
        "a file the record lacks stays"
    );
    assert_eq!(
        git(&project, &["status", "--porcelain"]).await,
        status_before
    );
    assert_eq!(
        std::fs::read(project.join(".git/index")).unwrap(),
        index_before,
        "the project's index is not touched"
    );
    let left: Vec<_> = std::fs::read_dir(&into)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("extract"))
        .collect();
    assert!(left.is_empty(), "no index of its own left: {left:?}");
    assert_unknown_ref_is_an_error(&project, &into).await;
}

async fn assert_unknown_ref_is_an_error(project: &Path, into: &Path) {
    let err = extract_tree(
        &runner(),
        project,
        &[],
        &CancellationToken::new(),
        "refs/corral/s/none/record",
        "implement/none/",
        into,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("checkout"), "{err}");
}
