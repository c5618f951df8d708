//! What the README's two commands need on the machine, how each need is checked, and how it is
//! installed: the one table of tool pins (cargo-deny, cargo-nextest; the CLIs' pins are
//! `pinned_clis.rs`), read by `cargo xtask ci`, `cargo xtask demo` and
//! `cargo xtask prerequisites`.
//!
//! A prerequisite that is missing is installed where this machine allows it (cargo tools with
//! `cargo install`, Debian packages with `apt-get` when running as root, the pinned CLIs with npm,
//! Python packages into `.cache/venv`); otherwise the command fails at once, naming the one command
//! that fixes each missing prerequisite. Nothing is installed silently: each install prints its
//! command first. Adding a Debian package or a Python package is one line in [`CI`] or [`DEMO`].
//!
//! Every check runs against a [`Machine`] (its `PATH`, `CARGO_HOME`, whether it is root, where
//! bubblewrap is), so the tests can ask what a fresh machine would get: an empty `CARGO_HOME`, a
//! `PATH` without cargo-deny and bubblewrap, a plain user.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::bail;

use crate::{install_clis, pinned_clis, shell};

/// The cargo-deny version `deny.toml` is written against (`cargo deny --version` prints
/// `cargo-deny 0.20.2`).
pub const CARGO_DENY_VERSION: &str = "0.20.2";

/// The cargo-nextest version installed where none is (any installed version is used as it is).
pub const CARGO_NEXTEST_VERSION: &str = "0.9.143";

/// One thing a command needs: how to see it is there, and how to get it.
#[derive(Debug, Clone, Copy)]
pub struct Prerequisite {
    /// Its name in messages.
    pub name: &'static str,
    /// How to see that it is there.
    pub check: Check,
    /// How to get it.
    pub install: Install,
    /// Whether the command can go on without it.
    pub need: Need,
}

/// How a prerequisite is checked.
#[derive(Debug, Clone, Copy)]
pub enum Check {
    /// `cargo <subcommand> --version` succeeds and, when given, prints `version`.
    CargoSubcommand {
        subcommand: &'static str,
        version: Option<&'static str>,
    },
    /// `<program> <args>` starts and succeeds.
    Runs {
        program: &'static str,
        args: &'static [&'static str],
    },
    /// bubblewrap builds a sandbox here (the engine's own probe: a read-only root in its own
    /// pid, user and IPC namespaces with every capability dropped), not merely exists.
    Bubblewrap,
    /// The pinned CLI with this binary name is installed under `.cache/clis` at its pinned version.
    PinnedCli(&'static str),
    /// `.cache/venv/bin/python -c 'import <module>'` succeeds.
    PythonModule(&'static str),
}

/// How a missing prerequisite is installed.
#[derive(Debug, Clone, Copy)]
pub enum Install {
    /// `cargo install <krate> --locked --version <version>`.
    Cargo {
        krate: &'static str,
        version: &'static str,
    },
    /// `apt-get install -y <package>`, as root only.
    Debian { package: &'static str },
    /// `cargo xtask install-clis <bin>` (npm, into `.cache/clis`).
    PinnedCli(&'static str),
    /// `pip install <package>==<version>` into the venv `.cache/venv` (created with
    /// `python3 -m venv` first).
    PythonVenv {
        package: &'static str,
        version: &'static str,
    },
    /// Not installed by xtask: the person does it, as `fix` says.
    Manual { fix: &'static str },
}

/// What happens when a prerequisite cannot be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The command fails.
    Required,
    /// The command goes on without it and says so (the demo without bubblewrap runs with
    /// explicit degraded-sandbox consent).
    Optional,
}

/// cargo-deny at its pinned version (the cargo-deny gate, and the self-check that plants a
/// violation for it).
pub const CARGO_DENY: Prerequisite = Prerequisite {
    name: "cargo-deny",
    check: Check::CargoSubcommand {
        subcommand: "deny",
        version: Some(CARGO_DENY_VERSION),
    },
    install: Install::Cargo {
        krate: "cargo-deny",
        version: CARGO_DENY_VERSION,
    },
    need: Need::Required,
};

const NPM: Prerequisite = Prerequisite {
    name: "npm",
    check: Check::Runs {
        program: "npm",
        args: &["--version"],
    },
    install: Install::Manual {
        fix: "install Node.js 20 or later with npm, then run this command again",
    },
    need: Need::Required,
};

const BUBBLEWRAP: Prerequisite = Prerequisite {
    name: "bubblewrap",
    check: Check::Bubblewrap,
    install: Install::Debian {
        package: "bubblewrap",
    },
    need: Need::Required,
};

/// podman, for the container backend's tests (`sandbox.backend = "container"`). Optional: where
/// it cannot be had (not root, no apt-get), those tests say `SKIPPED: <why>` and the suite goes
/// on.
const PODMAN: Prerequisite = Prerequisite {
    name: "podman",
    check: Check::Runs {
        program: "podman",
        args: &["--version"],
    },
    install: Install::Debian { package: "podman" },
    need: Need::Optional,
};

/// runc, the runtime the container backend tells podman to use: Debian's podman pulls crun,
/// which fails on a hybrid cgroup host ("cgroups in hybrid mode not supported").
const RUNC: Prerequisite = Prerequisite {
    name: "runc",
    check: Check::Runs {
        program: "runc",
        args: &["--version"],
    },
    install: Install::Debian { package: "runc" },
    need: Need::Optional,
};

/// GitHub's CLI, which the sprint's pull request and `--from-issues` run on the host; the
/// tests run the real one (Debian's, 2.23) against the fake forge of `corral-test-support`.
const GH: Prerequisite = Prerequisite {
    name: "gh",
    check: Check::Runs {
        program: "gh",
        args: &["--version"],
    },
    install: Install::Debian { package: "gh" },
    need: Need::Required,
};

/// fuse-overlayfs, for rootless podman: as a plain user the kernel refused podman's native
/// overlay of the host's root (`--rootfs /:O`: "mount overlay: … userxattr: invalid argument"),
/// and the user's `~/.config/containers/storage.conf` names fuse-overlayfs as its
/// `mount_program` instead (docs/security.md, the container backend as a plain user).
const FUSE_OVERLAYFS: Prerequisite = Prerequisite {
    name: "fuse-overlayfs",
    check: Check::Runs {
        program: "fuse-overlayfs",
        args: &["--version"],
    },
    install: Install::Debian {
        package: "fuse-overlayfs",
    },
    need: Need::Optional,
};

const fn pinned_cli(bin: &'static str) -> Prerequisite {
    Prerequisite {
        name: bin,
        check: Check::PinnedCli(bin),
        install: Install::PinnedCli(bin),
        need: Need::Required,
    }
}

/// `cargo xtask ci`: the gates' tools, the default sandbox the tests exercise, the five
/// pinned CLIs the contract and conformance tests run, and Ray for the `ray` executor's tests
/// (installed first, so the install is not part of any test's time).
pub const CI: &[Prerequisite] = &[
    CARGO_DENY,
    Prerequisite {
        name: "cargo-nextest",
        check: Check::CargoSubcommand {
            subcommand: "nextest",
            version: None,
        },
        install: Install::Cargo {
            krate: "cargo-nextest",
            version: CARGO_NEXTEST_VERSION,
        },
        need: Need::Required,
    },
    BUBBLEWRAP,
    PODMAN,
    RUNC,
    GH,
    FUSE_OVERLAYFS,
    NPM,
    pinned_cli("claude"),
    pinned_cli("codex"),
    pinned_cli("opencode"),
    pinned_cli("grok"),
    pinned_cli("copilot"),
    RAY,
];

/// Ray with its dashboard and Jobs API (`ray[default]`), in `.cache/venv`: the `ray` executor's
/// tests start a real cluster on 127.0.0.1 from it (`crates/test-support`'s `ray_cluster`).
/// The version is pinned so every machine runs the same head node and Jobs API.
const RAY: Prerequisite = Prerequisite {
    name: "ray",
    check: Check::PythonModule("ray.dashboard.modules.job"),
    install: Install::PythonVenv {
        package: "ray[default]",
        version: RAY_VERSION,
    },
    need: Need::Required,
};

/// The pinned Ray release (installs from the Python package index on CPython 3.11).
const RAY_VERSION: &str = "2.60.0";

/// `cargo xtask demo`: the pinned Claude Code, and bubblewrap where it can be had (without it the
/// demo runs with degraded-sandbox consent, and says so).
pub const DEMO: &[Prerequisite] = &[
    NPM,
    pinned_cli("claude"),
    Prerequisite {
        need: Need::Optional,
        ..BUBBLEWRAP
    },
];

/// The machine the checks and installs run on.
#[derive(Debug, Clone)]
pub struct Machine {
    /// The workspace root (where `.cache/` is).
    pub root: PathBuf,
    /// The `PATH` for checks and installs; `None`: this process's.
    pub path: Option<OsString>,
    /// The `CARGO_HOME` for checks and installs; `None`: this process's.
    pub cargo_home: Option<PathBuf>,
    /// Whether this process runs as root (Debian packages are installed only then).
    pub is_root: bool,
    /// The bubblewrap program, looked up on `path` unless it names a path.
    pub bwrap: PathBuf,
}

impl Machine {
    /// This machine, as this process sees it.
    pub fn current(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            path: None,
            cargo_home: None,
            is_root: is_root(),
            bwrap: PathBuf::from("bwrap"),
        }
    }

    /// `program` set up to run on this machine (its `PATH` and `CARGO_HOME`), in the root.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        self.configure(&mut cmd);
        cmd
    }

    /// `cargo`, set up to run on this machine.
    fn cargo(&self) -> Command {
        let mut cmd = shell::cargo(&self.root);
        self.configure(&mut cmd);
        cmd
    }

    fn configure(&self, cmd: &mut Command) {
        cmd.current_dir(&self.root);
        if let Some(path) = &self.path {
            cmd.env("PATH", path);
        }
        if let Some(home) = &self.cargo_home {
            cmd.env("CARGO_HOME", home);
        }
    }

    /// Where Python packages go: `<root>/.cache/venv`.
    fn venv(&self) -> PathBuf {
        self.root.join(".cache/venv")
    }
}

/// Whether this process runs as root (real uid 0, from `/proc/self/status`).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .map(|line| line.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// It is there; the text says what was found (a version, a path).
    Present(String),
    /// It is not (usable); the text says why.
    Missing(String),
}

/// Runs the check of `prerequisite` on `machine`.
pub fn check(machine: &Machine, prerequisite: &Prerequisite) -> Found {
    match prerequisite.check {
        Check::CargoSubcommand {
            subcommand,
            version,
        } => {
            let mut cmd = machine.cargo();
            cmd.args([subcommand, "--version"]);
            match first_line_of_success(&mut cmd) {
                Ok(found) => match version {
                    Some(wanted) if !found.contains(wanted) => {
                        Found::Missing(format!("found {found}, the pinned version is {wanted}"))
                    }
                    Some(_) | None => Found::Present(found),
                },
                Err(why) => Found::Missing(why),
            }
        }
        Check::Runs { program, args } => {
            let mut cmd = machine.command(program);
            cmd.args(args);
            match first_line_of_success(&mut cmd) {
                Ok(found) => Found::Present(format!("{program} {found}")),
                Err(why) => Found::Missing(why),
            }
        }
        Check::Bubblewrap => {
            let mut cmd = machine.command(&machine.bwrap);
            // The engine's namespaces and capability drop (`corral_engine::sandbox`): a machine
            // where root cannot make a user namespace has no usable sandbox.
            cmd.args([
                "--die-with-parent",
                "--unshare-pid",
                "--unshare-user",
                "--unshare-ipc",
                "--cap-drop",
                "ALL",
                "--ro-bind",
                "/",
                "/",
                "--",
                "true",
            ]);
            match first_line_of_success(&mut cmd) {
                Ok(_) => {
                    Found::Present(format!("{} builds a sandbox here", machine.bwrap.display()))
                }
                Err(why) => Found::Missing(why),
            }
        }
        Check::PinnedCli(bin) => {
            let path = pinned_clis::bin_path(&machine.root, bin);
            match pinned_clis::pinned(bin) {
                Some((package, version)) if pinned_clis::is_current(&machine.root, bin) => {
                    Found::Present(format!("{package}@{version}"))
                }
                Some((package, version)) => Found::Missing(format!(
                    "{package}@{version} is not installed at {}",
                    shell::relative(&machine.root, &path)
                )),
                None => Found::Missing(format!("`{bin}` is not a pinned CLI")),
            }
        }
        Check::PythonModule(module) => {
            let mut cmd = machine.command(machine.venv().join("bin/python"));
            cmd.args(["-c", &format!("import {module}")]);
            match first_line_of_success(&mut cmd) {
                Ok(_) => Found::Present(format!("{module} in .cache/venv")),
                Err(why) => Found::Missing(why),
            }
        }
    }
}

/// The first line a command printed when it succeeded; why not otherwise.
fn first_line_of_success(cmd: &mut Command) -> Result<String, String> {
    let line = shell::display(cmd);
    match cmd.output() {
        Ok(out) if out.status.success() => {
            let stdout = String::from_utf8_lossy(&out.stdout);
            Ok(stdout.lines().next().unwrap_or_default().trim().to_owned())
        }
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let said = stderr.lines().next().unwrap_or_default().trim();
            Err(format!("`{line}` failed ({}): {said}", out.status))
        }
        Err(err) => Err(format!("`{line}` could not start: {err}")),
    }
}

/// How a missing prerequisite can be had on `machine`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remedy {
    /// xtask installs it with this command.
    Install(String),
    /// xtask cannot; this command (or step) fixes it.
    Fix(String),
}

/// How `prerequisite` would be had on `machine` (without installing anything).
pub fn remedy(machine: &Machine, prerequisite: &Prerequisite) -> Remedy {
    match prerequisite.install {
        Install::Cargo { krate, version } => Remedy::Install(format!(
            "cargo install {krate} --locked --version {version}"
        )),
        Install::Debian { package } => {
            let has_apt =
                first_line_of_success(machine.command("apt-get").arg("--version")).is_ok();
            if machine.is_root && has_apt {
                Remedy::Install(format!("apt-get install -y {package}"))
            } else {
                Remedy::Fix(format!(
                    "sudo apt-get install {package} (or your system's package manager)"
                ))
            }
        }
        Install::PinnedCli(bin) => {
            if matches!(check(machine, &NPM), Found::Present(_)) {
                Remedy::Install(format!("cargo xtask install-clis {bin}"))
            } else {
                Remedy::Fix(format!(
                    "install Node.js 20 or later with npm, then `cargo xtask install-clis {bin}`"
                ))
            }
        }
        Install::PythonVenv { package, version } => Remedy::Install(format!(
            "python3 -m venv .cache/venv && .cache/venv/bin/pip install {package}=={version}"
        )),
        Install::Manual { fix } => Remedy::Fix(fix.to_owned()),
    }
}

/// Carries out the install of `prerequisite` on `machine`, printing the command first.
fn install(machine: &Machine, prerequisite: &Prerequisite) -> anyhow::Result<()> {
    match prerequisite.install {
        Install::Cargo { krate, version } => {
            println!(
                "    installing {krate} {version}: cargo install {krate} --locked --version {version}"
            );
            let mut cmd = machine.cargo();
            cmd.args(["install", krate, "--locked", "--version", version]);
            shell::run(&mut cmd)
        }
        Install::Debian { package } => {
            println!("    installing {package}: apt-get update && apt-get install -y {package}");
            for args in [&["update"][..], &["install", "-y", package][..]] {
                let mut cmd = machine.command("apt-get");
                cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
                shell::run(&mut cmd)?;
            }
            Ok(())
        }
        Install::PinnedCli(bin) => install_clis::run(&machine.root, &[bin.to_owned()]),
        Install::PythonVenv { package, version } => {
            let venv = machine.venv();
            println!(
                "    installing {package} {version} into {}",
                shell::relative(&machine.root, &venv)
            );
            if !venv.join("bin/pip").is_file() {
                let mut cmd = machine.command("python3");
                cmd.args(["-m", "venv"]).arg(&venv);
                shell::run(&mut cmd)?;
            }
            let mut cmd = machine.command(venv.join("bin/pip"));
            cmd.args(["install", "--quiet", &format!("{package}=={version}")]);
            shell::run(&mut cmd)
        }
        Install::Manual { fix } => {
            bail!("{} cannot be installed by xtask: {fix}", prerequisite.name)
        }
    }
}

/// What [`ensure`] ended with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Optional prerequisites that could not be had, each with why (the caller says what it does
    /// without them).
    pub without: Vec<(&'static str, String)>,
}

impl Outcome {
    /// Why the optional prerequisite `name` is missing, if it is.
    pub fn missing(&self, name: &str) -> Option<&str> {
        self.without
            .iter()
            .find(|(missing, _)| *missing == name)
            .map(|(_, why)| why.as_str())
    }
}

/// Checks every prerequisite of `list`, installing each missing one where `machine` allows.
/// Fails (before installing anything) when a required one can be had neither way, naming the fix
/// of each; fails when an install did not make its check pass.
pub fn ensure(machine: &Machine, list: &[Prerequisite]) -> anyhow::Result<Outcome> {
    let found: Vec<Found> = list.iter().map(|p| check(machine, p)).collect();
    let mut unfixable = Vec::new();
    for (prerequisite, found) in list.iter().zip(&found) {
        if let (Found::Missing(why), Remedy::Fix(fix), Need::Required) =
            (found, remedy(machine, prerequisite), prerequisite.need)
        {
            unfixable.push(format!(
                "{} is missing ({why})\nhint: {fix}",
                prerequisite.name
            ));
        }
    }
    if !unfixable.is_empty() {
        bail!("{}", unfixable.join("\n"));
    }
    let mut outcome = Outcome::default();
    for (prerequisite, found) in list.iter().zip(found) {
        let name = prerequisite.name;
        let why = match found {
            Found::Present(what) => {
                println!("    ok  {name:<14} {what}");
                continue;
            }
            Found::Missing(why) => why,
        };
        println!("    --  {name:<14} missing: {why}");
        let result = match remedy(machine, prerequisite) {
            Remedy::Install(_) => match install(machine, prerequisite) {
                Ok(()) => match check(machine, prerequisite) {
                    Found::Present(what) => {
                        println!("    ok  {name:<14} {what}");
                        Ok(())
                    }
                    Found::Missing(still) => bail!("{still}, even after the install"),
                },
                // Another run on this machine may have been installing it at the same moment
                // (two `cargo install`s of one crate: the later fails with "binary already
                // exists"; apt-get fails on the other's lock). What counts is the check.
                Err(err) => match check(machine, prerequisite) {
                    Found::Present(what) => {
                        println!("    ok  {name:<14} {what} (installed meanwhile by another run)");
                        Ok(())
                    }
                    Found::Missing(_) => Err(err),
                },
            },
            Remedy::Fix(fix) => Err(anyhow::anyhow!("{why}; fix: {fix}")),
        };
        match (result, prerequisite.need) {
            (Ok(()), Need::Required | Need::Optional) => {}
            (Err(err), Need::Optional) => outcome.without.push((name, format!("{err:#}"))),
            (Err(err), Need::Required) => {
                let hint = match remedy(machine, prerequisite) {
                    Remedy::Install(cmd) | Remedy::Fix(cmd) => cmd,
                };
                bail!("{name} could not be installed: {err:#}\nhint: {hint}");
            }
        }
    }
    Ok(outcome)
}

/// `cargo xtask prerequisites [ci|demo] [--plan]`: checks (and, without `--plan`, installs) what
/// the README command needs; `--plan` only says what would be done.
pub fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let mut plan_only = false;
    let mut list = CI;
    for arg in args {
        match arg.as_str() {
            "--plan" => plan_only = true,
            "ci" => list = CI,
            "demo" => list = DEMO,
            other => bail!("unknown argument `{other}` (known: ci, demo, --plan)"),
        }
    }
    let machine = Machine::current(root);
    if !plan_only {
        let outcome = ensure(&machine, list)?;
        for (name, why) in &outcome.without {
            println!("without {name}: {why}");
        }
        return Ok(());
    }
    for prerequisite in list {
        println!("{}", plan_line(&machine, prerequisite));
    }
    Ok(())
}

/// One line of `--plan`: what was found, or what would be done about it.
pub fn plan_line(machine: &Machine, prerequisite: &Prerequisite) -> String {
    let name = prerequisite.name;
    match check(machine, prerequisite) {
        Found::Present(what) => format!("ok       {name:<14} {what}"),
        Found::Missing(why) => match (remedy(machine, prerequisite), prerequisite.need) {
            (Remedy::Install(cmd), Need::Required | Need::Optional) => {
                format!("install  {name:<14} {cmd}   ({why})")
            }
            (Remedy::Fix(fix), Need::Required) => {
                format!("missing  {name:<14} fix: {fix}   ({why})")
            }
            (Remedy::Fix(fix), Need::Optional) => {
                format!("without  {name:<14} fix: {fix}   ({why})")
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine as a new user's is: an empty `CARGO_HOME`, a `PATH` holding only cargo, rustc
    /// and rustup (rustup's proxies), node and npm, so neither cargo-deny, cargo-nextest,
    /// bubblewrap nor apt-get is found.
    fn fresh_machine(bin: &Path, cargo_home: &Path, is_root: bool) -> Machine {
        let which = |program: &str| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|dir| dir.join(program))
                .find(|path| path.is_file())
                .unwrap_or_else(|| panic!("{program} is not on this machine's PATH"))
        };
        for program in ["cargo", "rustc", "rustup", "node", "npm"] {
            std::os::unix::fs::symlink(which(program), bin.join(program)).unwrap();
        }
        Machine {
            root: shell::project_root(),
            path: Some(bin.as_os_str().to_owned()),
            cargo_home: Some(cargo_home.to_path_buf()),
            is_root,
            bwrap: PathBuf::from("bwrap"),
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = shell::project_root()
            .join("target/xtask-prereq-tests")
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("cargo-home")).unwrap();
        dir
    }

    fn find<'a>(list: &'a [Prerequisite], name: &str) -> &'a Prerequisite {
        list.iter().find(|p| p.name == name).unwrap()
    }

    /// On a fresh machine each prerequisite of the README's two commands is either installed by
    /// xtask or named with the command that fixes it; `cargo xtask ci` fails before installing
    /// anything when one cannot be had, and `cargo xtask demo` goes on without bubblewrap.
    #[test]
    fn on_a_fresh_machine_each_prerequisite_installs_or_names_its_fix() {
        let dir = scratch("fresh");
        let user = fresh_machine(&dir.join("bin"), &dir.join("cargo-home"), false);

        for tool in ["cargo-deny", "cargo-nextest"] {
            let prerequisite = find(CI, tool);
            assert!(
                matches!(check(&user, prerequisite), Found::Missing(_)),
                "{tool}"
            );
            let Remedy::Install(cmd) = remedy(&user, prerequisite) else {
                panic!("{tool} is installed with cargo");
            };
            assert!(
                cmd.starts_with(&format!("cargo install {tool} --locked --version ")),
                "{cmd}"
            );
        }
        assert!(plan_line(&user, find(CI, "cargo-deny")).contains(CARGO_DENY_VERSION));

        let bwrap = find(CI, "bubblewrap");
        assert!(matches!(check(&user, bwrap), Found::Missing(_)));
        assert_eq!(
            remedy(&user, bwrap),
            Remedy::Fix(
                "sudo apt-get install bubblewrap (or your system's package manager)".into()
            )
        );
        let err = ensure(&user, CI).unwrap_err().to_string();
        assert!(err.starts_with("bubblewrap is missing ("), "{err}");
        assert!(
            err.contains("\nhint: sudo apt-get install bubblewrap"),
            "{err}"
        );
        // gh too: the suite runs the real one against the fake forge, and like bubblewrap it
        // comes from Debian, which a plain user cannot install.
        assert!(err.contains("\ngh is missing ("), "{err}");
        assert!(err.contains("\nhint: sudo apt-get install gh"), "{err}");
        assert_eq!(
            err.lines().count(),
            4,
            "only bubblewrap and gh are beyond xtask: {err}"
        );
        assert!(
            !dir.join("cargo-home/bin").exists(),
            "nothing was installed before the failure"
        );

        // The demo needs only npm and the pinned Claude Code (installed with the repository's
        // .cache), and runs without bubblewrap, naming why.
        if pinned_clis::is_current(&user.root, "claude") {
            let outcome = ensure(&user, DEMO).unwrap();
            let why = outcome.missing("bubblewrap").unwrap();
            assert!(
                why.contains("bwrap") && why.contains("sudo apt-get install bubblewrap"),
                "{why}"
            );
        }

        // As root with apt-get, bubblewrap is installed from Debian's packages.
        let apt_get = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join("apt-get"))
            .find(|p| p.is_file());
        if let Some(apt_get) = apt_get {
            std::os::unix::fs::symlink(apt_get, dir.join("bin/apt-get")).unwrap();
            let root = Machine {
                is_root: true,
                ..user
            };
            assert_eq!(
                remedy(&root, bwrap),
                Remedy::Install("apt-get install -y bubblewrap".into())
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A root machine whose `apt-get` installs `race-probe` but exits as if another run held
    /// its lock (what two runs at once see), and fails outright for anything else.
    fn racing_apt_machine(dir: &Path) -> Machine {
        let bin = dir.join("bin");
        let probe = bin.join("corral-race-probe");
        let apt = bin.join("apt-get");
        std::fs::write(
            &apt,
            format!(
                "#!/bin/sh\n\
                 case \"$1\" in --version) echo 'apt 2.6.1'; exit 0;; update) exit 0;; esac\n\
                 if [ \"$3\" = race-probe ]; then\n\
                 printf '#!/bin/sh\\necho race-probe 1.0\\n' > {probe}\n\
                 /bin/chmod +x {probe}\n\
                 fi\n\
                 echo 'E: Could not get lock /var/lib/dpkg/lock-frontend' >&2\n\
                 exit 100\n",
                probe = probe.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&apt, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        Machine {
            root: shell::project_root(),
            path: Some(bin.into_os_string()),
            cargo_home: Some(dir.join("cargo-home")),
            is_root: true,
            bwrap: PathBuf::from("bwrap"),
        }
    }

    fn probe_package(package: &'static str) -> Prerequisite {
        Prerequisite {
            name: package,
            check: Check::Runs {
                program: "corral-race-probe",
                args: &["--version"],
            },
            install: Install::Debian { package },
            need: Need::Required,
        }
    }

    /// Two runs at once on one machine (helpers, a second terminal) both install a missing tool;
    /// the one that loses the race must not fail when the tool is there after all.
    #[test]
    fn an_install_that_fails_because_another_run_installed_it_counts_as_installed() {
        let dir = scratch("race");
        let machine = racing_apt_machine(&dir);
        let outcome = ensure(&machine, &[probe_package("race-probe")]);
        assert!(outcome.is_ok(), "{outcome:?}");
    }

    #[test]
    fn an_install_that_fails_and_leaves_the_tool_missing_still_fails() {
        let dir = scratch("race-lost");
        let machine = racing_apt_machine(&dir);
        let err = ensure(&machine, &[probe_package("other-package")]).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("other-package could not be installed"),
            "{text}"
        );
        assert!(text.contains("apt-get install -y other-package"), "{text}");
    }

    #[test]
    fn without_npm_the_clis_name_node_as_the_fix() {
        let dir = scratch("no-npm");
        let mut machine = fresh_machine(&dir.join("bin"), &dir.join("cargo-home"), false);
        std::fs::remove_file(dir.join("bin/npm")).unwrap();
        machine.root = dir.clone();
        let claude = find(CI, "claude");
        assert!(matches!(check(&machine, claude), Found::Missing(_)));
        assert_eq!(
            remedy(&machine, claude),
            Remedy::Fix(
                "install Node.js 20 or later with npm, then `cargo xtask install-clis claude`"
                    .into()
            )
        );
        let err = ensure(&machine, DEMO).unwrap_err().to_string();
        assert!(err.starts_with("npm is missing ("), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_present_tools_are_found() {
        let machine = Machine::current(&shell::project_root());
        let rustc = Prerequisite {
            name: "rustc",
            check: Check::Runs {
                program: "rustc",
                args: &["--version"],
            },
            install: Install::Manual { fix: "rustup" },
            need: Need::Required,
        };
        match check(&machine, &rustc) {
            Found::Present(what) => assert!(what.starts_with("rustc rustc 1."), "{what}"),
            Found::Missing(why) => panic!("{why}"),
        }
        let venv_tool = Prerequisite {
            name: "example",
            check: Check::PythonModule("json"),
            install: Install::PythonVenv {
                package: "example",
                version: "1.0",
            },
            need: Need::Optional,
        };
        assert_eq!(
            remedy(&machine, &venv_tool),
            Remedy::Install(
                "python3 -m venv .cache/venv && .cache/venv/bin/pip install example==1.0".into()
            )
        );
    }
}
