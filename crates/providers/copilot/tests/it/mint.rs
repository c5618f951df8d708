//! Minted session ids: the UUID format (version 4, RFC 4122 variant), validity as a
//! [`SessionId`], and the real `/dev/urandom` source giving distinct ids.

use corral_copilot::UuidSource;
use corral_copilot::mint::format_uuid_v4;
use corral_ports::SessionId;

use crate::support::{FIXED_BYTES, FIXED_ID};

fn is_v4(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && id
            .chars()
            .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        && groups[2].starts_with('4')
        && groups[3].starts_with(['8', '9', 'a', 'b'])
}

#[test]
fn version_and_variant_bits_are_forced_and_the_rest_kept() {
    assert_eq!(format_uuid_v4(FIXED_BYTES), FIXED_ID);
    assert_eq!(
        format_uuid_v4([0; 16]),
        "00000000-0000-4000-8000-000000000000"
    );
    assert_eq!(
        format_uuid_v4([0xff; 16]),
        "ffffffff-ffff-4fff-bfff-ffffffffffff"
    );
    assert!(is_v4(FIXED_ID));
    assert!(SessionId::new(FIXED_ID).is_ok());
}

#[test]
fn the_urandom_source_mints_distinct_valid_ids() {
    let source = UuidSource::default();
    let ids: Vec<String> = (0..32).map(|_| source.mint().unwrap()).collect();
    for id in &ids {
        assert!(is_v4(id), "{id}");
        assert!(SessionId::new(id.as_str()).is_ok());
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
    assert_eq!(format!("{source:?}"), "UuidSource");
}
