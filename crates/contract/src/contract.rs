//! [`Contract`]: which signal kinds one flow step accepts, and how many of each.
//!
//! A contract is data, not code: the validator checks a document against it, the renderer tells
//! the agent about it, and the corrective message restates it. The built-in contracts are
//! [`Contract::generator`] and [`Contract::evaluator`] for the implementation's rounds, and one
//! per flow of the sprint's life ([`Contract::refine`], [`Contract::plan`], [`Contract::ideate`],
//! [`Contract::ready`], [`Contract::pull_request`]); callers build others with [`Contract::new`]
//! and [`Contract::accept`].

use std::fmt;

use crate::document::SignalsDocument;
use crate::error::{Issue, IssueStage};
use crate::signal::SignalKind;

/// How many signals of one kind a contract allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Multiplicity {
    /// Zero or more.
    Any,
    /// Zero or one.
    AtMostOne,
    /// Exactly one.
    ExactlyOne,
    /// One or more.
    AtLeastOne,
}

impl Multiplicity {
    /// The bounds as `(min, max)`; `max` is `None` when unbounded.
    #[must_use]
    pub fn bounds(self) -> (usize, Option<usize>) {
        match self {
            Self::Any => (0, None),
            Self::AtMostOne => (0, Some(1)),
            Self::ExactlyOne => (1, Some(1)),
            Self::AtLeastOne => (1, None),
        }
    }
}

impl fmt::Display for Multiplicity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Any => "any number",
            Self::AtMostOne => "at most one",
            Self::ExactlyOne => "exactly one",
            Self::AtLeastOne => "at least one",
        })
    }
}

/// The signal kinds one flow step accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contract {
    name: String,
    kinds: Vec<(SignalKind, Multiplicity)>,
    exactly_one_of: Vec<SignalKind>,
}

impl Contract {
    /// An empty contract named `name` (the name appears in prompts and messages).
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            kinds: Vec::new(),
            exactly_one_of: Vec::new(),
        }
    }

    /// Accepts `kind`, `multiplicity` times. Accepting a kind again replaces its multiplicity and
    /// keeps its position.
    #[must_use]
    pub fn accept(mut self, kind: SignalKind, multiplicity: Multiplicity) -> Self {
        match self.kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some(entry) => entry.1 = multiplicity,
            None => self.kinds.push((kind, multiplicity)),
        }
        self
    }

    /// Requires exactly one signal among `kinds` in total (an outcome: done or blocked, say).
    /// Kinds not yet accepted are accepted at most once. Replaces an earlier requirement.
    #[must_use]
    pub fn require_exactly_one_of(mut self, kinds: impl IntoIterator<Item = SignalKind>) -> Self {
        let mut group: Vec<SignalKind> = Vec::new();
        for kind in kinds {
            if !group.contains(&kind) {
                group.push(kind);
            }
        }
        for kind in &group {
            if !self.accepts(*kind) {
                self.kinds.push((*kind, Multiplicity::AtMostOne));
            }
        }
        self.exactly_one_of = group;
        self
    }

    /// The generator step: it does the work and ends with exactly one of `task-complete` or
    /// `task-blocked`; it may add notes, decisions, learnings, changes and one commit message.
    #[must_use]
    pub fn generator() -> Self {
        Self::new("generator")
            .require_exactly_one_of([SignalKind::TaskComplete, SignalKind::TaskBlocked])
            .accept(SignalKind::Change, Multiplicity::Any)
            .accept(SignalKind::CommitMessage, Multiplicity::AtMostOne)
            .accept(SignalKind::Note, Multiplicity::Any)
            .accept(SignalKind::Decision, Multiplicity::Any)
            .accept(SignalKind::Learning, Multiplicity::Any)
    }

    /// The evaluator step: exactly one `evaluation`, and any notes.
    #[must_use]
    pub fn evaluator() -> Self {
        Self::new("evaluator")
            .accept(SignalKind::Evaluation, Multiplicity::ExactlyOne)
            .accept(SignalKind::Note, Multiplicity::Any)
    }

    /// Refining a ticket: exactly one `refined-ticket`, and any notes.
    #[must_use]
    pub fn refine() -> Self {
        Self::new("refine")
            .accept(SignalKind::RefinedTicket, Multiplicity::ExactlyOne)
            .accept(SignalKind::Note, Multiplicity::Any)
    }

    /// Planning a sprint: exactly one `task-plan`, and any notes and decisions.
    #[must_use]
    pub fn plan() -> Self {
        Self::new("plan")
            .accept(SignalKind::TaskPlan, Multiplicity::ExactlyOne)
            .accept(SignalKind::Note, Multiplicity::Any)
            .accept(SignalKind::Decision, Multiplicity::Any)
    }

    /// Ideating: exactly one `ideated-tickets`, and any notes.
    #[must_use]
    pub fn ideate() -> Self {
        Self::new("ideate")
            .accept(SignalKind::IdeatedTickets, Multiplicity::ExactlyOne)
            .accept(SignalKind::Note, Multiplicity::Any)
    }

    /// Readiness: exactly one verify script (the sprint's check), at most one setup script and
    /// one set of gates, and any context-file proposals (the validator does not compare their
    /// paths, so the caller keeps the last proposal per path).
    #[must_use]
    pub fn ready() -> Self {
        Self::new("ready")
            .accept(SignalKind::AgentsMdProposal, Multiplicity::Any)
            .accept(SignalKind::SetupScript, Multiplicity::AtMostOne)
            .accept(SignalKind::VerifyScript, Multiplicity::ExactlyOne)
            .accept(SignalKind::VerifyGates, Multiplicity::AtMostOne)
            .accept(SignalKind::Note, Multiplicity::Any)
    }

    /// Writing the pull request: exactly one `pr-content`.
    #[must_use]
    pub fn pull_request() -> Self {
        Self::new("pull-request").accept(SignalKind::PrContent, Multiplicity::ExactlyOne)
    }

    /// The contract's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether a signal of `kind` is accepted.
    #[must_use]
    pub fn accepts(&self, kind: SignalKind) -> bool {
        self.multiplicity(kind).is_some()
    }

    /// How many signals of `kind` are allowed, or `None` if the kind is not accepted.
    #[must_use]
    pub fn multiplicity(&self, kind: SignalKind) -> Option<Multiplicity> {
        self.kinds
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, multiplicity)| *multiplicity)
    }

    /// The accepted kinds with their multiplicities, in the order they were accepted.
    pub fn kinds(&self) -> impl Iterator<Item = (SignalKind, Multiplicity)> + '_ {
        self.kinds.iter().copied()
    }

    /// The kinds of which exactly one signal in total is required; empty if none is.
    #[must_use]
    pub fn exactly_one_of(&self) -> &[SignalKind] {
        &self.exactly_one_of
    }

    /// A complete document that satisfies this contract: one example signal per accepted kind,
    /// except that of an exactly-one-of group only the first kind is shown.
    #[must_use]
    pub fn example_document(&self) -> SignalsDocument {
        let signals = self
            .kinds
            .iter()
            .filter(|(kind, _)| {
                !self.exactly_one_of.contains(kind) || self.exactly_one_of.first() == Some(kind)
            })
            .map(|(kind, _)| kind.example())
            .collect();
        SignalsDocument::new(signals)
    }

    /// The shortest useful document that satisfies this contract: one example signal per
    /// required kind and the first kind of the exactly-one-of group; if nothing is required, one
    /// signal of the first accepted kind.
    #[must_use]
    pub fn minimal_example_document(&self) -> SignalsDocument {
        let mut signals: Vec<_> = self
            .kinds
            .iter()
            .filter(|(kind, multiplicity)| {
                multiplicity.bounds().0 > 0 || self.exactly_one_of.first() == Some(kind)
            })
            .map(|(kind, _)| kind.example())
            .collect();
        if signals.is_empty()
            && let Some((kind, _)) = self.kinds.first()
        {
            signals.push(kind.example());
        }
        SignalsDocument::new(signals)
    }

    /// The accepted kind names as `` `a`, `b` `` for messages.
    pub(crate) fn kind_list(&self) -> String {
        quoted_list(self.kinds.iter().map(|(kind, _)| *kind))
    }

    /// Checks the counts of the recognised, accepted signals: `seen` holds `(index, kind)` in
    /// document order.
    pub(crate) fn check_counts(&self, seen: &[(usize, SignalKind)]) -> Vec<Issue> {
        let mut issues = Vec::new();
        for (kind, multiplicity) in &self.kinds {
            let indices: Vec<usize> = seen
                .iter()
                .filter(|(_, k)| k == kind)
                .map(|(index, _)| *index)
                .collect();
            let (min, max) = multiplicity.bounds();
            if indices.len() < min {
                issues.push(Issue::new(
                    "signals",
                    format!(
                        "expected {multiplicity} `{kind}` signal, found {}",
                        indices.len()
                    ),
                    IssueStage::Contract,
                ));
            }
            if let Some(max) = max
                && let Some(first_extra) = indices.get(max)
            {
                issues.push(Issue::new(
                    format!("signals[{first_extra}]"),
                    format!(
                        "one `{kind}` signal too many: the `{}` step allows {multiplicity}, found {}",
                        self.name,
                        indices.len()
                    ),
                    IssueStage::Contract,
                ));
            }
        }
        if !self.exactly_one_of.is_empty() {
            let indices: Vec<usize> = seen
                .iter()
                .filter(|(_, k)| self.exactly_one_of.contains(k))
                .map(|(index, _)| *index)
                .collect();
            let group = quoted_list(self.exactly_one_of.iter().copied());
            match indices.as_slice() {
                [] => issues.push(Issue::new(
                    "signals",
                    format!("expected exactly one of {group}, found none"),
                    IssueStage::Contract,
                )),
                [_] => {}
                [_, second, ..] => issues.push(Issue::new(
                    format!("signals[{second}]"),
                    format!(
                        "expected exactly one of {group} in total, found {}",
                        indices.len()
                    ),
                    IssueStage::Contract,
                )),
            }
        }
        issues
    }
}

pub(crate) fn quoted_list(kinds: impl Iterator<Item = SignalKind>) -> String {
    kinds
        .map(|kind| format!("`{kind}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::{Contract, Multiplicity};
    use crate::error::IssueStage;
    use crate::signal::SignalKind;

    #[test]
    fn accept_replaces_and_keeps_order() {
        let contract = Contract::new("x")
            .accept(SignalKind::Note, Multiplicity::Any)
            .accept(SignalKind::Change, Multiplicity::Any)
            .accept(SignalKind::Note, Multiplicity::ExactlyOne);
        let kinds: Vec<_> = contract.kinds().collect();
        assert_eq!(
            kinds,
            [
                (SignalKind::Note, Multiplicity::ExactlyOne),
                (SignalKind::Change, Multiplicity::Any)
            ]
        );
    }

    #[test]
    fn counts_are_checked_per_kind_and_per_group() {
        let generator = Contract::generator();
        let none = generator.check_counts(&[(0, SignalKind::Note)]);
        assert_eq!(none.len(), 1);
        assert_eq!(none[0].path, "signals");
        assert_eq!(none[0].stage, IssueStage::Contract);

        let both =
            generator.check_counts(&[(0, SignalKind::TaskComplete), (1, SignalKind::TaskBlocked)]);
        assert_eq!(both.len(), 1);
        assert_eq!(both[0].path, "signals[1]");

        let twice = generator.check_counts(&[
            (0, SignalKind::TaskComplete),
            (3, SignalKind::CommitMessage),
            (5, SignalKind::CommitMessage),
        ]);
        assert_eq!(twice.len(), 1);
        assert_eq!(twice[0].path, "signals[5]");

        let evaluator = Contract::evaluator();
        let missing = evaluator.check_counts(&[]);
        assert_eq!(missing.len(), 1);
        assert!(missing[0].message.contains("exactly one `evaluation`"));
    }
}
