//! The prompt section: snapshots, and its example round-tripping through the validator.

use std::path::Path;

use corral_contract::{
    Contract, Multiplicity, SignalKind, render_contract_section, validate_signals_str,
};

const SIGNALS: &str = "/runs/r1/generator/signals.json";

/// Every contract defined in this crate, plus custom ones: every kind, only an outcome group,
/// nothing required.
pub fn contracts() -> Vec<Contract> {
    let all = SignalKind::ALL
        .into_iter()
        .fold(Contract::new("all"), |contract, kind| {
            contract.accept(kind, Multiplicity::Any)
        });
    let outcome_only = Contract::new("outcome")
        .require_exactly_one_of([SignalKind::TaskBlocked, SignalKind::TaskVerified]);
    vec![
        Contract::generator(),
        Contract::evaluator(),
        Contract::refine(),
        Contract::plan(),
        Contract::ideate(),
        Contract::ready(),
        Contract::pull_request(),
        all,
        outcome_only,
    ]
}

/// The text of the first ```json block in `markdown`.
fn json_block(markdown: &str) -> &str {
    let start = markdown.find("```json\n").unwrap() + "```json\n".len();
    let end = start + markdown[start..].find("\n```").unwrap();
    &markdown[start..end]
}

#[test]
fn plan_section() {
    insta::assert_snapshot!(render_contract_section(
        &Contract::plan(),
        Path::new(SIGNALS)
    ));
}

#[test]
fn generator_section() {
    insta::assert_snapshot!(render_contract_section(
        &Contract::generator(),
        Path::new(SIGNALS)
    ));
}

#[test]
fn evaluator_section() {
    insta::assert_snapshot!(render_contract_section(
        &Contract::evaluator(),
        Path::new("/runs/r1/evaluator/signals.json")
    ));
}

#[test]
fn the_example_in_every_section_validates_against_its_contract() {
    for contract in contracts() {
        let section = render_contract_section(&contract, Path::new(SIGNALS));
        let example = json_block(&section);
        let result = validate_signals_str(example, Path::new(SIGNALS), &contract);
        assert!(result.is_ok(), "{}: {result:?}\n{example}", contract.name());
        assert_eq!(example, contract.example_document().to_json_pretty());
    }
}

#[test]
fn the_minimal_example_validates_and_is_never_empty() {
    for contract in contracts() {
        let minimal = contract.minimal_example_document();
        assert!(!minimal.signals.is_empty(), "{}", contract.name());
        let text = minimal.to_json_pretty();
        let result = validate_signals_str(&text, Path::new(SIGNALS), &contract);
        assert!(result.is_ok(), "{}: {result:?}\n{text}", contract.name());
    }
    let kinds: Vec<SignalKind> = Contract::generator()
        .minimal_example_document()
        .signals
        .iter()
        .map(|s| s.kind())
        .collect();
    assert_eq!(kinds, [SignalKind::TaskComplete]);
}

#[test]
fn every_accepted_kind_and_field_is_described() {
    for contract in contracts() {
        let section = render_contract_section(&contract, Path::new(SIGNALS));
        for (kind, _) in contract.kinds() {
            assert!(
                section.contains(&format!("- `{kind}` (")),
                "{kind} in {}",
                contract.name()
            );
        }
    }
    let all_contract = contracts().into_iter().find(|c| c.name() == "all").unwrap();
    let all = render_contract_section(&all_contract, Path::new(SIGNALS));
    for field in [
        "reason",
        "pathPrefix",
        "timeoutMs",
        "appliesTo",
        "dimensions",
        "finding",
        "subject",
        "dependsOn",
        "acceptanceCriteria",
        "content",
    ] {
        assert!(all.contains(&format!("`{field}` (")), "{field}");
    }
}

#[test]
fn the_path_is_given_absolute() {
    let section = render_contract_section(&Contract::generator(), Path::new("out/signals.json"));
    let expected = std::env::current_dir().unwrap().join("out/signals.json");
    assert!(
        section.contains(&format!("```text\n{}\n```", expected.display())),
        "{section}"
    );
}
