//! A spawn's breach of its limits (`corral_process::Breach`, what the sandbox's guard saw) in
//! the ports' words: the `limit-exceeded` outcome of a run or a command.

use corral_ports::{LimitExceeded, ResourceLimit};
use corral_process::{Breach, Limit};

/// The limit `breach` names, with its cap and peak, as the ports say it.
pub fn exceeded(breach: &Breach) -> LimitExceeded {
    LimitExceeded {
        limit: match breach.limit {
            Limit::Memory => ResourceLimit::Memory,
            Limit::Pids => ResourceLimit::Pids,
            Limit::Cpus => ResourceLimit::Cpus,
            Limit::Disk => ResourceLimit::Disk,
        },
        cap: breach.cap,
        peak: breach.peak,
    }
}
