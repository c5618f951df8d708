//! Reading `session-id.txt`.

use std::fs;

use corral_contract::{SessionId, SessionIdError, SessionIdFileError, read_session_id};

fn read(contents: &[u8]) -> Result<Option<SessionId>, SessionIdFileError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session-id.txt");
    fs::write(&path, contents).unwrap();
    read_session_id(&path)
}

fn invalid(result: Result<Option<SessionId>, SessionIdFileError>) -> SessionIdError {
    match result {
        Err(SessionIdFileError::Invalid { source, .. }) => source,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn no_file_means_no_session() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        read_session_id(&dir.path().join("session-id.txt"))
            .unwrap()
            .is_none()
    );
}

#[test]
fn one_line_with_or_without_a_newline() {
    for contents in [
        &b"ses_01:abc.def-9\n"[..],
        b"ses_01:abc.def-9\r\n",
        b"ses_01:abc.def-9",
    ] {
        let id = read(contents).unwrap().unwrap();
        assert_eq!(id.as_str(), "ses_01:abc.def-9");
    }
}

#[test]
fn what_the_engine_writes_reads_back() {
    let id = SessionId::parse("0f8e4f7a-1b2c-4d5e-8f90-123456789abc").unwrap();
    assert_eq!(read(id.to_file_contents().as_bytes()).unwrap(), Some(id));
}

#[test]
fn malformed_files_are_refused() {
    assert_eq!(invalid(read(b"")), SessionIdError::Empty);
    assert_eq!(invalid(read(b"\n")), SessionIdError::Empty);
    assert_eq!(invalid(read(b"--resume\n")), SessionIdError::LeadingDash);
    assert_eq!(
        invalid(read(b"abc\ndef\n")),
        SessionIdError::ForbiddenChar { ch: '\n', index: 3 }
    );
    assert_eq!(
        invalid(read(b"abc\n\n")),
        SessionIdError::ForbiddenChar { ch: '\n', index: 3 }
    );
    assert_eq!(
        invalid(read(b" abc\n")),
        SessionIdError::ForbiddenChar { ch: ' ', index: 0 }
    );
    assert!(matches!(
        read(b"ab\xffc\n"),
        Err(SessionIdFileError::NotUtf8 { .. })
    ));
    assert!(matches!(
        read(&[b'a'; 2048]),
        Err(SessionIdFileError::TooLarge { size: 2048, .. })
    ));
    assert!(matches!(
        invalid(read(&[b'a'; 257])),
        SessionIdError::TooLong { len: 257 }
    ));
}
