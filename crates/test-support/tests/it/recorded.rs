//! The repair of lines the recorder cut: what each `Repair` keeps of the same cut line, and that
//! a line stored whole is left alone.

use corral_test_support::recorded::{Repair, restore};

#[test]
fn each_repair_ends_the_kept_text_where_it_says() {
    // Cut inside a string value of an object opened after the last comma.
    let line = r#"{"a":1,"b":{"c":"long te ...[900 chars]"#;
    assert_eq!(
        restore(line, Repair::AtLastComma).as_deref(),
        Some(r#"{"a":1}"#)
    );
    assert_eq!(
        restore(line, Repair::AtLastMember).as_deref(),
        Some(r#"{"a":1,"b":{}}"#)
    );
    assert_eq!(
        restore(line, Repair::AtLastValue).as_deref(),
        Some(r#"{"a":1,"b":{"c":"long te"}}"#)
    );
}

#[test]
fn a_half_escape_is_dropped_and_nothing_complete_means_no_repair() {
    let line = r#"{"a":"x\u00 ...[40 chars]"#;
    assert_eq!(restore(line, Repair::AtLastComma), None);
    assert_eq!(restore(line, Repair::AtLastMember).as_deref(), Some("{}"));
    assert_eq!(
        restore(line, Repair::AtLastValue).as_deref(),
        Some(r#"{"a":"x"}"#)
    );
    assert_eq!(
        restore("plain text ...[40 chars]", Repair::AtLastValue),
        None
    );
}

#[test]
fn lines_stored_whole_are_not_repaired() {
    for repair in [
        Repair::AtLastComma,
        Repair::AtLastMember,
        Repair::AtLastValue,
    ] {
        assert_eq!(restore(r#"{"a":1}"#, repair), None);
        assert_eq!(restore(r#"{"a":"see ...[3 chars] below"}"#, repair), None);
    }
}
