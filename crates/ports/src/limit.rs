//! A limit on what one spawn may use (`[limits]`), and the one it went over: the vocabulary of
//! the `limit-exceeded` outcome, shared by a CLI's run ([`crate::ProviderError::LimitExceeded`])
//! and a caller's command ([`crate::CommandEnd::LimitExceeded`]).

use std::fmt;

use serde::{Deserialize, Serialize};

/// One resource `[limits]` caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceLimit {
    /// Memory of the spawn's whole process tree, in bytes.
    Memory,
    /// Processes and threads of the spawn's whole tree.
    Pids,
    /// CPU time, in thousandths of a core. A rate: a spinner is held to it and never goes over.
    Cpus,
    /// Disk, in bytes: any one file, and the measured directories (the run directory, the
    /// private temporary directory) together.
    Disk,
}

impl ResourceLimit {
    /// The name the settings give it (`[limits] memory`).
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceLimit::Memory => "memory",
            ResourceLimit::Pids => "pids",
            ResourceLimit::Cpus => "cpus",
            ResourceLimit::Disk => "disk",
        }
    }

    /// `value`, in this limit's unit, for a person: `256 MiB`, `48 processes`, `0.500 cores`.
    pub fn amount(self, value: u64) -> String {
        match self {
            ResourceLimit::Memory | ResourceLimit::Disk => bytes(value),
            ResourceLimit::Pids => format!("{value} processes"),
            ResourceLimit::Cpus => format!("{}.{:03} cores", value / 1000, value % 1000),
        }
    }
}

impl fmt::Display for ResourceLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Bytes in binary units, to one decimal where that is not a whole number.
fn bytes(value: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    let mut whole = value;
    while whole >= 1024 && unit + 1 < UNITS.len() {
        whole /= 1024;
        unit += 1;
    }
    if unit == 0 {
        return format!("{value} bytes");
    }
    let scale = 1u64 << (10 * unit);
    if value.is_multiple_of(scale) {
        format!("{whole} {}", UNITS[unit])
    } else {
        // Tenths, rounded down: what is shown is never more than what was used.
        let tenths = value.saturating_mul(10) / scale;
        format!("{}.{} {}", tenths / 10, tenths % 10, UNITS[unit])
    }
}

/// The limit a spawn went over, and Corral ended it for: the `limit-exceeded` outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitExceeded {
    /// Which limit.
    pub limit: ResourceLimit,
    /// Its cap, in the limit's unit (bytes, processes).
    pub cap: u64,
    /// The highest use seen, in the same unit, when the kernel or the measure says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<u64>,
}

impl fmt::Display for LimitExceeded {
    /// `memory limit of 256 MiB (peak 255.9 MiB)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} limit of {}", self.limit, self.limit.amount(self.cap))?;
        if let Some(peak) = self.peak {
            write!(f, " (peak {})", self.limit.amount(peak))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_a_person_writes_them() {
        assert_eq!(ResourceLimit::Memory.amount(256 << 20), "256 MiB");
        assert_eq!(ResourceLimit::Memory.amount((3 << 29) + 1), "1.5 GiB");
        assert_eq!(ResourceLimit::Disk.amount(512), "512 bytes");
        assert_eq!(ResourceLimit::Pids.amount(48), "48 processes");
        assert_eq!(ResourceLimit::Cpus.amount(1500), "1.500 cores");
        let exceeded = LimitExceeded {
            limit: ResourceLimit::Memory,
            cap: 64 << 20,
            peak: Some((64 << 20) - 4096),
        };
        assert_eq!(
            exceeded.to_string(),
            "memory limit of 64 MiB (peak 63.9 MiB)"
        );
        let json = serde_json::to_string(&exceeded).unwrap();
        assert_eq!(json, r#"{"limit":"memory","cap":67108864,"peak":67104768}"#);
    }
}
