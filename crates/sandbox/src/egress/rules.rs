//! The allow-list: which `host:port` pairs a confined run may reach, and how a CLI declares the
//! endpoints it needs.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// One entry of the allow-list: `host:port`, `*.suffix:port` (any name below `suffix`, not
/// `suffix` itself), or an IP literal (`127.0.0.1:8080`, `[::1]:8080`). The port is required:
/// a rule opens one service, never a whole host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AllowRule {
    host: HostPattern,
    port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum HostPattern {
    /// A name (lower case, no trailing dot) or an IP literal (without brackets).
    Exact(String),
    /// `*.example.com` is kept as `.example.com`.
    Below(String),
}

/// Why a rule does not parse. Not retryable: the setting must be fixed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{rule:?} is not an allow-list entry: {why} (write host:port, *.domain:port or [ipv6]:port)"
)]
pub struct BadRule {
    /// The text as given.
    pub rule: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// Lower case, without brackets around an IPv6 literal and without a trailing dot.
fn normalize_host(host: &str) -> String {
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Splits `host:port` (with `[v6]:port`) into its parts; the port is required.
pub fn split_authority(text: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        (v6, after.strip_prefix(':')?)
    } else {
        let (host, port) = text.rsplit_once(':')?;
        if host.contains(':') {
            // An IPv6 literal must be bracketed, or its last group reads as the port.
            return None;
        }
        (host, port)
    };
    let port: u16 = port.parse().ok().filter(|&p| p != 0)?;
    let host = normalize_host(host);
    (!host.is_empty()).then_some((host, port))
}

fn valid_name(host: &str) -> bool {
    host.parse::<IpAddr>().is_ok()
        || host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

impl FromStr for AllowRule {
    type Err = BadRule;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why| BadRule {
            rule: text.to_string(),
            why,
        };
        let trimmed = text.trim();
        if trimmed.contains("://") {
            return Err(bad("a rule is host:port, not a URL"));
        }
        let (host, port) = split_authority(trimmed).ok_or_else(|| bad("no valid port"))?;
        let host = match host.strip_prefix("*.") {
            None if host.starts_with('*') => {
                return Err(bad("a wildcard needs a domain with a dot after `*.`"));
            }
            Some(below) => {
                if !valid_name(below) || below.parse::<IpAddr>().is_ok() || !below.contains('.') {
                    return Err(bad("a wildcard needs a domain with a dot after `*.`"));
                }
                HostPattern::Below(format!(".{below}"))
            }
            None => {
                if !valid_name(&host) {
                    return Err(bad("the host is not a name or an IP address"));
                }
                HostPattern::Exact(host)
            }
        };
        Ok(AllowRule { host, port })
    }
}

impl fmt::Display for AllowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Exact(h) if h.contains(':') => write!(f, "[{h}]:{}", self.port),
            HostPattern::Exact(h) => write!(f, "{h}:{}", self.port),
            HostPattern::Below(suffix) => write!(f, "*{suffix}:{}", self.port),
        }
    }
}

impl serde::Serialize for AllowRule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A rule is written as its text, `host:port` (see [`fmt::Display`]).
impl schemars::JsonSchema for AllowRule {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AllowRule".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(generator)
    }
}

impl AllowRule {
    /// The endpoint an `http://` or `https://` URL points at (its port, or 80 / 443), e.g. a
    /// CLI's base-URL variable. `None` for anything else.
    pub fn from_url(url: &str) -> Option<AllowRule> {
        let url = url.trim();
        let (scheme, rest) = url.split_once("://")?;
        let default_port = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let authority = rest.split(['/', '?', '#']).next()?;
        // Credentials in a URL (`user:pass@host`) are not part of the endpoint.
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        let with_port = if authority.ends_with(']') || !authority.contains(':') {
            format!("{authority}:{default_port}")
        } else {
            authority.to_string()
        };
        with_port.parse().ok()
    }

    /// `host:port` exactly, for a provider's fixed endpoints.
    pub fn exact(host: &str, port: u16) -> AllowRule {
        AllowRule {
            host: HostPattern::Exact(normalize_host(host)),
            port,
        }
    }

    /// Whether this rule allows a connection to `host` (normalized) on `port`.
    fn allows(&self, host: &str, port: u16) -> bool {
        port == self.port
            && match &self.host {
                HostPattern::Exact(h) => h == host,
                HostPattern::Below(suffix) => host.len() > suffix.len() && host.ends_with(suffix),
            }
    }

    /// Whether the rule names the host itself: a loopback or unspecified address, or
    /// `localhost`. Only such a rule may connect to the host; a name that merely resolves there
    /// is refused (see [`AllowList::decide`]).
    pub fn names_the_host(&self) -> bool {
        match &self.host {
            HostPattern::Exact(h) => {
                h == "localhost"
                    || h.ends_with(".localhost")
                    || h.parse::<IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified())
            }
            HostPattern::Below(_) => false,
        }
    }
}

/// How a CLI can be made to send its traffic through a proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyHonour {
    /// It reads `HTTP_PROXY` / `HTTPS_PROXY` (and `ALL_PROXY`) from its environment.
    Environment,
    /// A Node.js program whose `fetch` ignores the proxy variables (Node before 24): Corral
    /// preloads (`NODE_OPTIONS=--require=…`) a connector that tunnels `fetch` through the proxy,
    /// on top of the variables, which Node's other clients may read.
    NodeFetchPreload,
}

/// What a CLI needs from the network: the endpoints its adapter declares (model API, sign-in)
/// and how it honours a proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressNeeds {
    /// The `host:port` pairs the CLI cannot work without.
    pub endpoints: Vec<AllowRule>,
    /// How its traffic is routed through the proxy.
    pub proxy: ProxyHonour,
}

/// The allow-list of one run: the provider's endpoints and the user's rules.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllowList {
    rules: Vec<AllowRule>,
}

/// What the proxy decided for one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<'a> {
    /// Allowed by this rule.
    Allowed(&'a AllowRule),
    /// Not on the list.
    NotListed,
}

impl AllowList {
    /// The rules, in order, without duplicates.
    pub fn new(rules: impl IntoIterator<Item = AllowRule>) -> Self {
        let mut out: Vec<AllowRule> = Vec::new();
        for rule in rules {
            if !out.contains(&rule) {
                out.push(rule);
            }
        }
        AllowList { rules: out }
    }

    /// The rules.
    pub fn rules(&self) -> &[AllowRule] {
        &self.rules
    }

    /// Whether the proxy would let a connection to `endpoint` through (an exact `host:port`,
    /// or a wildcard this list holds as it is), before it resolves the name.
    pub fn permits(&self, endpoint: &AllowRule) -> bool {
        match &endpoint.host {
            HostPattern::Exact(host) => {
                matches!(self.decide(host, endpoint.port), Decision::Allowed(_))
            }
            HostPattern::Below(_) => self.rules.contains(endpoint),
        }
    }

    /// Looks `host:port` up (the host as the client wrote it).
    pub fn decide(&self, host: &str, port: u16) -> Decision<'_> {
        let host = normalize_host(host);
        self.rules
            .iter()
            .find(|r| r.allows(&host, port))
            .map_or(Decision::NotListed, Decision::Allowed)
    }
}

/// Network access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkPolicy {
    /// Only the provider's model endpoints and the user's allow-list, through Corral's proxy
    /// (see `egress`); nothing on the host itself.
    #[default]
    Allowlist,
    /// The host's network, unconfined.
    Host,
    /// No network at all (a fresh network namespace with only its own loopback).
    None,
}

impl NetworkPolicy {
    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkPolicy::Allowlist => "allowlist",
            NetworkPolicy::Host => "host",
            NetworkPolicy::None => "none",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> AllowRule {
        text.parse().unwrap()
    }

    #[test]
    fn rules_parse_and_print_back() {
        for text in [
            "api.anthropic.com:443",
            "*.npmjs.org:443",
            "127.0.0.1:8080",
            "[::1]:8080",
            "localhost:3000",
        ] {
            assert_eq!(rule(text).to_string(), text);
        }
        assert_eq!(
            rule("API.Example.COM.:443").to_string(),
            "api.example.com:443"
        );
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (text, why) in [
            ("api.anthropic.com", "no valid port"),
            ("api.anthropic.com:0", "no valid port"),
            ("api.anthropic.com:http", "no valid port"),
            ("::1:80", "no valid port"),
            ("https://api.anthropic.com:443", "not a URL"),
            ("*.com:443", "wildcard"),
            ("*:443", "wildcard"),
            ("bad host:443", "not a name"),
        ] {
            let err = text.parse::<AllowRule>().unwrap_err();
            assert!(err.to_string().contains(why), "{text}: {err}");
            assert!(err.to_string().contains(text.trim()), "{err}");
        }
    }

    #[test]
    fn a_rule_opens_one_port_of_one_host() {
        let list = AllowList::new([rule("api.anthropic.com:443"), rule("*.npmjs.org:443")]);
        assert!(matches!(
            list.decide("api.anthropic.com", 443),
            Decision::Allowed(_)
        ));
        assert!(matches!(
            list.decide("API.anthropic.com.", 443),
            Decision::Allowed(_)
        ));
        assert_eq!(list.decide("api.anthropic.com", 80), Decision::NotListed);
        assert_eq!(list.decide("evil-anthropic.com", 443), Decision::NotListed);
        assert!(matches!(
            list.decide("registry.npmjs.org", 443),
            Decision::Allowed(_)
        ));
        assert_eq!(
            list.decide("npmjs.org", 443),
            Decision::NotListed,
            "a wildcard covers names below the domain, not the domain itself"
        );
        assert_eq!(list.decide("evilnpmjs.org", 443), Decision::NotListed);
        assert_eq!(list.decide("127.0.0.1", 443), Decision::NotListed);
    }

    #[test]
    fn urls_give_their_endpoint() {
        for (url, want) in [
            ("http://127.0.0.1:4000/v1", Some("127.0.0.1:4000")),
            ("https://api.x.ai/v1", Some("api.x.ai:443")),
            ("http://gateway.corp", Some("gateway.corp:80")),
            ("https://user:pw@gw.corp:8443/x?y", Some("gw.corp:8443")),
            ("http://[::1]/v1", Some("[::1]:80")),
            ("http://[::1]:9/v1", Some("[::1]:9")),
            ("ftp://example.com/", None),
            ("not a url", None),
        ] {
            assert_eq!(
                AllowRule::from_url(url).map(|r| r.to_string()).as_deref(),
                want,
                "{url}"
            );
        }
    }

    #[test]
    fn only_a_rule_naming_the_host_may_reach_it() {
        assert!(rule("127.0.0.1:9").names_the_host());
        assert!(rule("[::1]:9").names_the_host());
        assert!(rule("localhost:9").names_the_host());
        assert!(!rule("api.example.com:443").names_the_host());
        assert!(!rule("*.example.com:443").names_the_host());
        assert!(!rule("10.0.0.1:443").names_the_host());
    }

    #[test]
    fn an_endpoint_is_permitted_by_an_exact_rule_or_a_wildcard_above_it() {
        let list = AllowList::new([rule("api.x.ai:443"), rule("*.corp.example:8443")]);
        assert!(list.permits(&rule("API.x.ai:443")));
        assert!(list.permits(&rule("gw.corp.example:8443")));
        assert!(list.permits(&rule("*.corp.example:8443")));
        assert!(!list.permits(&rule("api.x.ai:80")));
        assert!(!list.permits(&rule("corp.example:8443")));
    }

    #[test]
    fn duplicates_are_dropped_in_order() {
        let list = AllowList::new([rule("a.b:1"), rule("c.d:2"), rule("a.b:1")]);
        let names: Vec<String> = list.rules().iter().map(ToString::to_string).collect();
        assert_eq!(names, ["a.b:1", "c.d:2"]);
    }
}
