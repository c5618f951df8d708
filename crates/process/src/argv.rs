//! The argv budget: measure a command line against the platform's limits before spawning, and
//! name the measured size and the limit when it does not fit (instead of a bare `E2BIG`).
//!
//! Limits: Linux caps each argument at 131 072 bytes including its NUL (`MAX_ARG_STRLEN`) and
//! argv plus environment at `ARG_MAX`; Windows caps the whole command line at 32 767 UTF-16 units
//! (`CreateProcess`), and at 8 191 when an npm `.cmd` shim runs it through `cmd.exe`.

use std::ffi::OsStr;

/// Linux's per-argument limit, NUL included.
pub const LINUX_MAX_ARG_STRLEN: usize = 131_072;
/// Windows `CreateProcess` command-line limit, in UTF-16 units.
pub const WINDOWS_CREATE_PROCESS_MAX: usize = 32_767;
/// Windows `cmd.exe` command-line limit (npm installs CLIs as `.cmd` shims).
pub const WINDOWS_CMD_MAX: usize = 8_191;

/// The platform rules to measure against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgvPlatform {
    /// Linux, with the given `ARG_MAX` for argv plus environment.
    Linux {
        /// Total budget for argv and envp, pointers included.
        arg_max: usize,
    },
    /// Windows; `via_cmd_shim` when the program is a `.cmd`/`.bat` run by `cmd.exe`.
    Windows {
        /// Whether `cmd.exe` runs the program.
        via_cmd_shim: bool,
    },
}

impl ArgvPlatform {
    /// The platform this process runs on, with `ARG_MAX` read from the system on Unix.
    pub fn current() -> Self {
        if cfg!(windows) {
            return ArgvPlatform::Windows {
                via_cmd_shim: false,
            };
        }
        let arg_max = nix::unistd::sysconf(nix::unistd::SysconfVar::ARG_MAX)
            .ok()
            .flatten()
            .and_then(|v| usize::try_from(v).ok())
            .unwrap_or(2 * 1024 * 1024);
        ArgvPlatform::Linux { arg_max }
    }
}

/// A command line that does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("command line too long: {measured} bytes measured against the {limit_name} limit of {limit}{}", .argument.map(|i| format!(" (argument {i})")).unwrap_or_default())]
pub struct ArgvTooLong {
    /// The measured size.
    pub measured: usize,
    /// The limit.
    pub limit: usize,
    /// The limit's name.
    pub limit_name: &'static str,
    /// The argument index that broke a per-argument limit, if that was the one.
    pub argument: Option<usize>,
}

/// Measures `program` + `args` (+ `env` on Linux) and returns the total size when it fits.
pub fn check_argv<'a>(
    program: &OsStr,
    args: impl IntoIterator<Item = &'a OsStr> + Clone,
    env_bytes: usize,
    platform: ArgvPlatform,
) -> Result<usize, ArgvTooLong> {
    match platform {
        ArgvPlatform::Linux { arg_max } => {
            let ptr = std::mem::size_of::<usize>();
            let mut total = program.len() + 1 + ptr;
            for (i, arg) in args.into_iter().enumerate() {
                let size = arg.len() + 1;
                if size > LINUX_MAX_ARG_STRLEN {
                    return Err(ArgvTooLong {
                        measured: size,
                        limit: LINUX_MAX_ARG_STRLEN,
                        limit_name: "MAX_ARG_STRLEN",
                        argument: Some(i + 1),
                    });
                }
                total += size + ptr;
            }
            total += env_bytes;
            if total > arg_max {
                return Err(ArgvTooLong {
                    measured: total,
                    limit: arg_max,
                    limit_name: "ARG_MAX",
                    argument: None,
                });
            }
            Ok(total)
        }
        ArgvPlatform::Windows { via_cmd_shim } => {
            let mut total = windows_quoted_len(&program.to_string_lossy());
            for arg in args {
                total += 1 + windows_quoted_len(&arg.to_string_lossy());
            }
            let (limit, limit_name) = if via_cmd_shim {
                (WINDOWS_CMD_MAX, "cmd.exe")
            } else {
                (WINDOWS_CREATE_PROCESS_MAX, "CreateProcess")
            };
            if total > limit {
                return Err(ArgvTooLong {
                    measured: total,
                    limit,
                    limit_name,
                    argument: None,
                });
            }
            Ok(total)
        }
    }
}

/// Size of the environment block as `execve` counts it: `NAME=VALUE\0` plus a pointer each.
pub fn env_block_bytes<'a>(vars: impl IntoIterator<Item = (&'a OsStr, &'a OsStr)>) -> usize {
    let ptr = std::mem::size_of::<usize>();
    vars.into_iter()
        .map(|(k, v)| k.len() + v.len() + 2 + ptr)
        .sum()
}

/// Length in UTF-16 units of one argument quoted the way `CreateProcess` parsing expects.
fn windows_quoted_len(arg: &str) -> usize {
    let units = arg.encode_utf16().count();
    let needs_quotes = arg.is_empty() || arg.contains([' ', '\t', '"']);
    let escapes = arg.matches('"').count();
    units + escapes + if needs_quotes { 2 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[String]) -> Vec<&OsStr> {
        v.iter().map(OsStr::new).collect()
    }

    #[test]
    fn linux_per_argument_limit_names_the_argument() {
        let args = vec!["-p".to_string(), "x".repeat(LINUX_MAX_ARG_STRLEN)];
        let err = check_argv(
            OsStr::new("claude"),
            os(&args),
            0,
            ArgvPlatform::Linux {
                arg_max: usize::MAX,
            },
        )
        .unwrap_err();
        assert_eq!(err.limit_name, "MAX_ARG_STRLEN");
        assert_eq!(err.measured, LINUX_MAX_ARG_STRLEN + 1);
        assert_eq!(err.argument, Some(2));
        assert_eq!(
            err.to_string(),
            "command line too long: 131073 bytes measured against the MAX_ARG_STRLEN limit of 131072 (argument 2)"
        );
        let fits = vec!["x".repeat(LINUX_MAX_ARG_STRLEN - 1)];
        assert!(
            check_argv(
                OsStr::new("c"),
                os(&fits),
                0,
                ArgvPlatform::Linux {
                    arg_max: usize::MAX
                }
            )
            .is_ok()
        );
    }

    #[test]
    fn linux_total_counts_the_environment() {
        let args = vec!["a".repeat(1000)];
        let err = check_argv(
            OsStr::new("c"),
            os(&args),
            5000,
            ArgvPlatform::Linux { arg_max: 4096 },
        )
        .unwrap_err();
        assert_eq!(err.limit_name, "ARG_MAX");
        assert!(err.measured > 4096);
    }

    #[test]
    fn windows_limits_for_create_process_and_cmd_shim() {
        let args = vec!["y".repeat(9000)];
        assert!(
            check_argv(
                OsStr::new("codex"),
                os(&args),
                0,
                ArgvPlatform::Windows {
                    via_cmd_shim: false
                }
            )
            .is_ok()
        );
        let err = check_argv(
            OsStr::new("codex"),
            os(&args),
            0,
            ArgvPlatform::Windows { via_cmd_shim: true },
        )
        .unwrap_err();
        assert_eq!((err.limit, err.limit_name), (8191, "cmd.exe"));
        let big = vec!["z".repeat(40_000)];
        let err = check_argv(
            OsStr::new("codex"),
            os(&big),
            0,
            ArgvPlatform::Windows {
                via_cmd_shim: false,
            },
        )
        .unwrap_err();
        assert_eq!(
            (err.limit, err.limit_name, err.measured),
            (32_767, "CreateProcess", 40_006)
        );
    }
}
