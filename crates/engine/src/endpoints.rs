//! Which network endpoints a provider's CLI will talk to, known before it is started: the ones
//! its adapter declares (its model API, a base URL in the child's environment), the ones its
//! own configuration files name ([`ConfiguredEndpoint`], which the adapter reads), and the user's allow-list rules. A
//! run refuses before the spawn when a configured endpoint the CLI will use is not on the
//! allow-list, and a refusal by the egress proxy during a run is reported as that, never as the
//! CLI's own reading of the 403 it got (see `classify`).
//!
//! An endpoint named only in the CLI's own configuration does not widen the allow-list: that
//! file sits in the CLI's state directory, which the agent can write (see docs/security.md).

use crate::adapter::{ChildEnv, CliAdapter, ConfiguredEndpoint};
use crate::config::EngineConfig;
use corral_process::env::EnvPolicy;
use corral_sandbox::NetworkPolicy;
use corral_sandbox::{AllowList, AllowRule, EgressNote};

/// The endpoints of one provider with one engine configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderEndpoints {
    /// Whether egress is confined to the allow-list (`sandbox.network = "allowlist"`).
    pub confined: bool,
    /// What the adapter declares, always allowed.
    pub declared: Vec<AllowRule>,
    /// What the CLI's configuration names.
    pub configured: Vec<ConfiguredEndpoint>,
    /// The run's allow-list: the declared endpoints and `sandbox.network_allow`.
    pub allow: AllowList,
}

impl ProviderEndpoints {
    /// Reads them for `adapter`, with the environment its child would get (without what a
    /// single attempt's command line sets).
    pub fn of(config: &EngineConfig, adapter: &dyn CliAdapter) -> Self {
        let env = EnvPolicy {
            inherit: config.env_inherit,
            profile: adapter.env_profile(),
            allow: config.env_allow.clone(),
            set: Vec::new(),
        }
        .resolve(config.ambient());
        Self::with_env(config, adapter, &env.vars)
    }

    /// [`ProviderEndpoints::of`] with the child's resolved variables.
    pub fn with_env(
        config: &EngineConfig,
        adapter: &dyn CliAdapter,
        vars: &[(String, String)],
    ) -> Self {
        let env = ChildEnv::new(vars);
        let declared = adapter.egress(&env).endpoints;
        let allow = AllowList::new(
            declared
                .iter()
                .chain(&config.sandbox.network_allow)
                .cloned(),
        );
        ProviderEndpoints {
            confined: config.sandbox.network == NetworkPolicy::Allowlist,
            declared,
            configured: adapter.configured_endpoints(&env),
            allow,
        }
    }

    /// The configured endpoints the allow-list does not let through.
    pub fn unlisted(&self) -> impl Iterator<Item = &ConfiguredEndpoint> {
        self.configured
            .iter()
            .filter(|c| !self.allow.permits(&c.endpoint))
    }

    /// The first configured endpoint a run would use that the proxy would refuse, when egress is
    /// confined.
    pub fn refused_in_use(&self) -> Option<&ConfiguredEndpoint> {
        if !self.confined {
            return None;
        }
        self.unlisted().find(|c| c.in_use)
    }
}

/// What allows `target` (`host:port`): the settings entry and the flag.
pub fn allow_hint(target: &str) -> String {
    format!(
        "add \"{target}\" to sandbox.network_allow in your settings file, or pass --allow-net {target}"
    )
}

/// What the proxy refused during one attempt: `(target, reason)`, in order, each target once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EgressRefusals(Vec<(String, String)>);

impl EgressRefusals {
    /// Keeps a refusal (a failure to reach an allowed target is not one).
    pub fn note(&mut self, note: &EgressNote) {
        match note {
            EgressNote::Refused { target, reason, .. } => {
                if !self.0.iter().any(|(t, _)| t == target) {
                    self.0.push((target.clone(), reason.clone()));
                }
            }
            EgressNote::Failed { .. } => {}
        }
    }

    /// The refusal that explains a failed attempt, when one does: a target whose refusal the
    /// CLI echoed (the proxy's 403 body, `corral: egress to <target> refused`, in its output),
    /// else the first target when the CLI's own failure was an HTTP 403 (`saw_403`, the
    /// proxy's answer). A refusal the failure does not point at (a background plugin install,
    /// telemetry) explains nothing: the attempt keeps its own class.
    pub fn cause(&self, output: &[&str], saw_403: bool) -> Option<(String, String)> {
        let echoed = self.0.iter().position(|(target, _)| {
            let body = format!("egress to {target} refused");
            output.iter().any(|text| text.contains(&body))
        });
        match echoed {
            Some(at) => {
                let mut ordered = self.clone();
                let named = ordered.0.remove(at);
                ordered.0.insert(0, named);
                ordered.first()
            }
            None if saw_403 => self.first(),
            None => None,
        }
    }

    /// The first refused target and why, with the other targets named.
    pub fn first(&self) -> Option<(String, String)> {
        let ((target, reason), rest) = self.0.split_first()?;
        let detail = if rest.is_empty() {
            format!("Corral's egress proxy refused it ({reason})")
        } else {
            let others: Vec<&str> = rest.iter().map(|(t, _)| t.as_str()).collect();
            format!(
                "Corral's egress proxy refused it ({reason}), and also {}",
                others.join(", ")
            )
        };
        Some((target.clone(), detail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(target: &str) -> EgressNote {
        EgressNote::Refused {
            method: "CONNECT".into(),
            target: target.into(),
            reason: "not on the allow-list".into(),
        }
    }

    #[test]
    fn refusals_name_the_first_target_and_the_others_once() {
        let mut r = EgressRefusals::default();
        assert_eq!(r.first(), None);
        r.note(&EgressNote::Failed {
            target: "a:1".into(),
            error: "refused".into(),
        });
        assert_eq!(r.first(), None, "a failure to reach is not a refusal");
        r.note(&refused("corp.example:8443"));
        r.note(&refused("telemetry.example:443"));
        r.note(&refused("corp.example:8443"));
        let (target, detail) = r.first().unwrap();
        assert_eq!(target, "corp.example:8443");
        assert_eq!(
            detail,
            "Corral's egress proxy refused it (not on the allow-list), and also telemetry.example:443"
        );
    }

    #[test]
    fn only_a_refusal_the_failure_points_at_is_its_cause() {
        let mut r = EgressRefusals::default();
        r.note(&refused("registry.npmjs.org:443"));
        r.note(&refused("llm.corp.example:8443"));
        assert_eq!(r.cause(&["APIError: 400 bad request"], false), None);
        let (target, detail) = r
            .cause(
                &[
                    "",
                    "403 Forbidden: corral: egress to llm.corp.example:8443 refused: it is not",
                ],
                false,
            )
            .unwrap();
        assert_eq!(target, "llm.corp.example:8443");
        assert!(
            detail.ends_with("and also registry.npmjs.org:443"),
            "{detail}"
        );
        let (target, _) = r.cause(&[""], true).unwrap();
        assert_eq!(
            target, "registry.npmjs.org:443",
            "a 403 without the body: the first"
        );
    }

    #[test]
    fn the_hint_names_the_entry_and_the_flag() {
        assert_eq!(
            allow_hint("corp.example:8443"),
            "add \"corp.example:8443\" to sandbox.network_allow in your settings file, or pass --allow-net corp.example:8443"
        );
    }
}
