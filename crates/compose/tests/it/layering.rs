//! Layer order, sources, and errors that name key, value and source.

use std::path::Path;

use corral_compose::{LoadedSettings, SettingSource, SettingsError, SettingsSources};
use corral_ports::ProviderId;

fn sources(dir: &Path) -> SettingsSources {
    SettingsSources {
        user_config: Some(dir.join("user.toml")),
        project_config: Some(dir.join("corral.toml")),
        trust_store: Some(dir.join("trusted-projects")),
        env: Vec::new(),
        flags: Vec::new(),
        project_root: dir.to_path_buf(),
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn invalid_lines(err: SettingsError) -> Vec<String> {
    match err {
        SettingsError::Invalid(lines) => lines,
        other => panic!("expected Invalid, got: {other}"),
    }
}

#[test]
fn defaults_hold_when_nothing_is_set() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = LoadedSettings::load(&sources(dir.path())).unwrap();
    let s = &loaded.settings;
    assert_eq!(s.run.idle_watchdog_ms, 300_000);
    assert_eq!(s.run.runs_dir, std::path::Path::new(".corral/runs"));
    assert_eq!(s.retry.rate_limit_retries, 3);
    assert_eq!(s.retry.backoff_initial_ms, 60_000);
    assert_eq!(s.retry.corrective_retries, 2);
    assert_eq!(s.run.provider, ProviderId::Claude);
    assert_eq!(
        loaded.source_of("run.idle_watchdog_ms"),
        SettingSource::Default
    );
}

#[test]
fn each_layer_overrides_the_one_below_and_is_named_as_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let mut src = sources(dir.path());
    write(
        &dir.path().join("user.toml"),
        "[run]\nidle_watchdog_ms = 100000\nkill_grace_ms = 2000\nwall_timeout_ms = 5000\n[retry]\nrate_limit_retries = 1\n",
    );
    write(
        &dir.path().join("corral.toml"),
        "[run]\nidle_watchdog_ms = 200000\nkill_grace_ms = 3000\n[providers.claude]\nmodel = \"opus\"\n",
    );
    src.env = vec![
        ("CORRAL_RUN__IDLE_WATCHDOG_MS".into(), "400000".into()),
        (
            "CORRAL_PROVIDERS__CLAUDE__ARGS".into(),
            "[\"--foo\", \"--bar\"]".into(),
        ),
        ("UNRELATED".into(), "x".into()),
    ];
    src.flags = vec![("run.provider".into(), serde_json::json!("codex"))];
    let loaded = LoadedSettings::load(&src).unwrap();
    let s = &loaded.settings;
    assert_eq!(s.run.idle_watchdog_ms, 400_000);
    assert_eq!(s.run.kill_grace_ms, 3000);
    assert_eq!(s.run.wall_timeout_ms, 5000);
    assert_eq!(s.retry.rate_limit_retries, 1);
    assert_eq!(s.providers.claude.model.as_deref(), Some("opus"));
    assert_eq!(s.providers.claude.args, ["--foo", "--bar"]);
    assert_eq!(s.run.provider, ProviderId::Codex);
    assert_eq!(
        loaded.source_of("run.idle_watchdog_ms"),
        SettingSource::Env("CORRAL_RUN__IDLE_WATCHDOG_MS".into())
    );
    assert_eq!(
        loaded.source_of("run.kill_grace_ms"),
        SettingSource::File(dir.path().join("corral.toml"))
    );
    assert_eq!(
        loaded.source_of("run.wall_timeout_ms"),
        SettingSource::File(dir.path().join("user.toml"))
    );
    assert_eq!(loaded.source_of("run.provider"), SettingSource::Flag);
    assert_eq!(
        loaded.source_of("run.max_line_bytes"),
        SettingSource::Default
    );
    let shown: Vec<String> = loaded
        .entries()
        .iter()
        .filter(|e| e.key.starts_with("run."))
        .map(|e| format!("{} = {} ({})", e.key, e.value, e.source))
        .collect();
    insta::assert_snapshot!(
        shown
            .join("\n")
            .replace(&dir.path().display().to_string(), "<dir>")
    );
}

#[test]
fn an_out_of_range_env_value_names_key_value_and_variable() {
    let dir = tempfile::tempdir().unwrap();
    let mut src = sources(dir.path());
    src.env = vec![("CORRAL_RUN__IDLE_WATCHDOG_MS".into(), "5000".into())];
    let lines = invalid_lines(LoadedSettings::load(&src).unwrap_err());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0]
            .starts_with("run.idle_watchdog_ms = 5000 (from env CORRAL_RUN__IDLE_WATCHDOG_MS): "),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("60000"), "{}", lines[0]);
}

#[test]
fn out_of_range_file_values_name_the_file_and_all_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("corral.toml"),
        "[retry]\nrate_limit_retries = 11\ncorrective_retries = 0\nbackoff_initial_ms = 5000\nbackoff_max_ms = 2000\n",
    );
    let lines = invalid_lines(LoadedSettings::load(&sources(dir.path())).unwrap_err());
    let file = dir.path().join("corral.toml").display().to_string();
    assert_eq!(lines.len(), 3, "{lines:?}");
    // Each at its file:line:column, with the line quoted under it.
    for (at, key) in [
        ("2:1", "retry.rate_limit_retries = 11"),
        ("3:1", "retry.corrective_retries = 0"),
        ("5:1", "retry.backoff_max_ms = 2000"),
    ] {
        let start = format!("{file}:{at}: {key}: ");
        let line = lines
            .iter()
            .find(|l| l.starts_with(&start))
            .unwrap_or_else(|| panic!("{start} missing: {lines:?}"));
        let quoted = key.replace("retry.", "");
        assert!(line.ends_with(&format!(" | {quoted}")), "{line}");
    }
}

#[test]
fn an_unknown_key_is_an_error_naming_it_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("corral.toml"),
        "[run]\nidle_watchdog = 100000\n",
    );
    let err = LoadedSettings::load(&sources(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("idle_watchdog"), "{err}");
    assert!(err.contains("corral.toml"), "{err}");
}

#[test]
fn an_unknown_provider_section_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("corral.toml"),
        "[providers.claud]\nmodel = \"x\"\n",
    );
    let err = LoadedSettings::load(&sources(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("claud"), "{err}");
}

#[test]
fn a_toml_syntax_error_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("corral.toml"),
        "[run]\nidle_watchdog_ms = = 3\n",
    );
    let err = LoadedSettings::load(&sources(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains("corral.toml"), "{err}");
}

#[test]
fn a_wrongly_typed_env_value_names_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let mut src = sources(dir.path());
    src.env = vec![("CORRAL_RETRY__RATE_LIMIT_RETRIES".into(), "soon".into())];
    let err = LoadedSettings::load(&src).unwrap_err().to_string();
    assert!(err.contains("soon"), "{err}");
    assert!(
        err.contains("rate_limit_retries") || err.contains("RATE_LIMIT_RETRIES"),
        "{err}"
    );
}

#[test]
fn a_bad_tested_versions_range_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("corral.toml"),
        "[providers.claude]\ntested_versions = \"banana\"\n",
    );
    let lines = invalid_lines(LoadedSettings::load(&sources(dir.path())).unwrap_err());
    let file = dir.path().join("corral.toml").display().to_string();
    assert!(
        lines[0].starts_with(&format!(
            "{file}:2:1: providers.claude.tested_versions = \"banana\""
        )),
        "{lines:?}"
    );
}

#[test]
fn discover_uses_xdg_then_home() {
    let cwd = Path::new("/work/project");
    let s = SettingsSources::discover(cwd, vec![("HOME".into(), "/home/u".into())]);
    assert_eq!(
        s.user_config.as_deref(),
        Some(Path::new("/home/u/.config/corral/config.toml"))
    );
    assert_eq!(
        s.project_config.as_deref(),
        Some(Path::new("/work/project/corral.toml"))
    );
    assert_eq!(
        s.trust_store.as_deref(),
        Some(Path::new("/home/u/.config/corral/trusted-projects"))
    );
    let s = SettingsSources::discover(
        cwd,
        vec![
            ("HOME".into(), "/home/u".into()),
            ("XDG_CONFIG_HOME".into(), "/xdg".into()),
        ],
    );
    assert_eq!(
        s.user_config.as_deref(),
        Some(Path::new("/xdg/corral/config.toml"))
    );
}

#[test]
fn the_network_allow_list_adds_up_from_every_source_the_user_controls() {
    let dir = tempfile::tempdir().unwrap();
    let mut src = sources(dir.path());
    write(
        &dir.path().join("user.toml"),
        "[sandbox]\nnetwork_allow = [\"registry.npmjs.org:443\", \"*.pythonhosted.org:443\"]\n",
    );
    src.env = vec![(
        "CORRAL_SANDBOX__NETWORK_ALLOW".into(),
        "[\"pypi.org:443\", \"registry.npmjs.org:443\"]".into(),
    )];
    src.flags = vec![(
        "sandbox.network_allow".into(),
        serde_json::json!(["127.0.0.1:8080"]),
    )];
    let loaded = LoadedSettings::load(&src).unwrap();
    assert_eq!(
        loaded.settings.sandbox.network_allow,
        [
            "registry.npmjs.org:443",
            "*.pythonhosted.org:443",
            "pypi.org:443",
            "127.0.0.1:8080"
        ],
        "each source adds to the others, none replaces them"
    );
    assert_eq!(
        loaded.settings.sandbox.network,
        corral_engine::NetworkPolicy::Allowlist,
        "confined by default"
    );
}

#[test]
fn a_project_file_may_not_widen_the_network() {
    let dir = tempfile::tempdir().unwrap();
    let src = sources(dir.path());
    let project = dir.path().join("corral.toml");
    for (text, key) in [
        ("[sandbox]\nnetwork = \"host\"\n", "sandbox.network"),
        ("[sandbox]\nnetwork = \"allowlist\"\n", "sandbox.network"),
        (
            "[sandbox]\nnetwork_allow = [\"evil.example:443\"]\n",
            "sandbox.network_allow",
        ),
    ] {
        write(&project, text);
        match LoadedSettings::load(&src) {
            Err(SettingsError::Untrusted { keys, file, .. }) => {
                assert_eq!(file, project);
                let names: Vec<&str> = keys.iter().map(|k| k.key.as_str()).collect();
                assert_eq!(names, [key], "{text}");
            }
            other => panic!("{text}: expected the project file refused, got {other:?}"),
        }
    }
    // Narrowing is the project's to decide.
    write(
        &project,
        "[sandbox]\nnetwork = \"none\"\nnetwork_allow = []\n",
    );
    let loaded = LoadedSettings::load(&src).unwrap();
    assert_eq!(
        loaded.settings.sandbox.network,
        corral_engine::NetworkPolicy::None
    );
    // A project file the user trusted as it is adds its rules to the user's.
    write(
        &project,
        "[sandbox]\nnetwork_allow = [\"registry.npmjs.org:443\"]\n",
    );
    write(
        &dir.path().join("user.toml"),
        "[sandbox]\nnetwork_allow = [\"pypi.org:443\"]\n",
    );
    corral_compose::trust_project_file(&src).unwrap();
    let loaded = LoadedSettings::load(&src).unwrap();
    assert_eq!(
        loaded.settings.sandbox.network_allow,
        ["pypi.org:443", "registry.npmjs.org:443"]
    );
    // And the user may turn it off.
    std::fs::remove_file(&project).unwrap();
    write(
        &dir.path().join("user.toml"),
        "[sandbox]\nnetwork = \"host\"\n",
    );
    let loaded = LoadedSettings::load(&src).unwrap();
    assert_eq!(
        loaded.settings.sandbox.network,
        corral_engine::NetworkPolicy::Host
    );
}

#[test]
fn a_bad_allow_list_entry_names_itself_and_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let mut src = sources(dir.path());
    src.env = vec![(
        "CORRAL_SANDBOX__NETWORK_ALLOW".into(),
        "[\"api.example.com\"]".into(),
    )];
    let lines = invalid_lines(LoadedSettings::load(&src).unwrap_err());
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].starts_with("sandbox.network_allow[0]")
            && lines[0].contains("no valid port")
            && lines[0].contains("CORRAL_SANDBOX__NETWORK_ALLOW"),
        "{lines:#?}"
    );
}

#[test]
fn the_project_root_is_the_nearest_corral_toml_then_the_git_top_then_the_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("repo");
    let deep = top.join("src/deep");
    std::fs::create_dir_all(&deep).unwrap();
    // Nothing marks a project: the cwd is the root.
    assert_eq!(corral_compose::project_root(&deep), deep);
    // The git work tree's top.
    std::fs::create_dir(top.join(".git")).unwrap();
    assert_eq!(corral_compose::project_root(&deep), top);
    // A corral.toml above the work tree never applies to it.
    write(
        &dir.path().join("corral.toml"),
        "[run]\nprovider = \"codex\"\n",
    );
    assert_eq!(corral_compose::project_root(&deep), top);
    // The nearest corral.toml at or below the top wins, and its settings apply from below it.
    write(
        &top.join("src/corral.toml"),
        "[run]\nprovider = \"codex\"\n",
    );
    assert_eq!(corral_compose::project_root(&deep), top.join("src"));
    let sources = SettingsSources::discover(&deep, vec![("HOME".into(), "/nonexistent".into())]);
    assert_eq!(
        sources.project_config.as_deref(),
        Some(top.join("src/corral.toml").as_path())
    );
    let loaded = LoadedSettings::load(&sources).unwrap();
    assert_eq!(loaded.settings.run.provider, ProviderId::Codex);
    assert_eq!(loaded.runs_root(), top.join("src/.corral/runs"));
}

#[test]
fn the_state_dir_is_ignored_by_git_and_a_users_gitignore_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    corral_compose::ignore_state_dir(dir.path(), Path::new(".corral/runs")).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".corral/.gitignore")).unwrap(),
        corral_compose::STATE_GITIGNORE
    );
    assert!(corral_compose::STATE_GITIGNORE.lines().any(|l| l == "*"));
    // A runs dir that does not start with a hidden directory is ignored in itself.
    corral_compose::ignore_state_dir(dir.path(), Path::new("out/runs")).unwrap();
    assert!(dir.path().join("out/runs/.gitignore").is_file());
    assert!(!dir.path().join("out/.gitignore").exists());
    // What the user wrote stays.
    write(&dir.path().join(".corral/.gitignore"), "runs/\n");
    corral_compose::ignore_state_dir(dir.path(), Path::new(".corral/runs")).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".corral/.gitignore")).unwrap(),
        "runs/\n"
    );
}

#[test]
fn every_unreadable_value_is_reported_in_corrals_words() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("corral.toml"),
        "[run]\nprovder = \"codex\"\nidle_watchdog_ms = \"soon\"\n[retry]\ncorrective_retries = true\n",
    );
    let mut s = sources(dir.path());
    s.env = vec![("CORRAL_RUN__KILL_GRACE_MS".into(), "slow".into())];
    let err = LoadedSettings::load(&s).unwrap_err();
    let lines = match err {
        SettingsError::Malformed(lines) => lines,
        other => panic!("expected Malformed, got: {other}"),
    };
    let file = dir.path().join("corral.toml").display().to_string();
    let text = lines.join("\n");
    assert_eq!(lines.len(), 4, "{text}");
    for expected in [
        format!("{file}:2:1: run.provder: unknown key; did you mean run.provider?"),
        format!("{file}:3:1: run.idle_watchdog_ms: \"soon\" is not a whole number"),
        format!("{file}:5:1: retry.corrective_retries: true is not a whole number"),
        "run.kill_grace_ms (from env CORRAL_RUN__KILL_GRACE_MS): \"slow\" is not a whole number"
            .to_string(),
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(&expected)),
            "{expected}\n{text}"
        );
    }
    assert!(
        !text.contains("default.") && !text.contains("TOML file") && !text.contains('`'),
        "{text}"
    );
}

#[test]
fn a_ray_executor_without_its_address_and_remote_or_with_a_bad_address_names_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("user.toml");
    write(&user, "[executor]\nkind = \"ray\"\n");
    let lines = invalid_lines(LoadedSettings::load(&sources(dir.path())).unwrap_err());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("executor.ray"), "{lines:?}");
    assert!(lines[0].contains("executor.ray.address"), "{lines:?}");
    write(
        &user,
        "[executor]\nkind = \"ray\"\n[executor.ray]\naddress = \"127.0.0.1:8265\"\nremote = \"file:///srv/repo.git\"\n",
    );
    let lines = invalid_lines(LoadedSettings::load(&sources(dir.path())).unwrap_err());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!(
            "{}:4:1: executor.ray.address = \"127.0.0.1:8265\"",
            user.display()
        )),
        "{lines:?}"
    );
    assert!(lines[0].contains("http://"), "{lines:?}");
    write(
        &user,
        "[executor]\nkind = \"ray\"\n[executor.ray]\naddress = \"http://127.0.0.1:8265\"\nremote = \"file:///srv/repo.git\"\nentrypoint_num_cpus = 2.5\n",
    );
    let loaded = LoadedSettings::load(&sources(dir.path())).unwrap();
    assert_eq!(
        loaded.settings.executor.kind,
        corral_compose::ExecutorKind::Ray
    );
    assert!((loaded.settings.executor.ray.entrypoint_num_cpus - 2.5).abs() < f64::EPSILON);
}

#[test]
fn a_project_file_may_not_name_the_ray_cluster_or_remote() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("corral.toml"),
        "[executor.ray]\naddress = \"http://attacker.example:8265\"\n",
    );
    let err = LoadedSettings::load(&sources(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("executor.ray.address"), "{err}");
}

/// Issue 29 item 1: `sandbox.hide` adds up from every source, a project file's included (hiding
/// more only takes power away), and a bad entry is named with its index, value and source.
#[test]
fn hidden_paths_add_up_and_a_bad_one_names_its_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut src = sources(dir.path());
    let user = dir.path().join("user.toml");
    write(
        &user,
        "[sandbox]\nhide = [\"~/.config/foo\", \"/srv/keys\"]\n",
    );
    write(
        &dir.path().join("corral.toml"),
        "[sandbox]\nhide = [\"~/.project-token\"]\n",
    );
    src.env = vec![(
        "CORRAL_SANDBOX__HIDE".into(),
        "[\"/srv/keys\", \"/etc/x\"]".into(),
    )];
    src.flags = vec![("sandbox.hide".into(), serde_json::json!(["~/.y"]))];
    let loaded = LoadedSettings::load(&src).unwrap();
    assert_eq!(
        loaded.settings.sandbox.hide,
        [
            "~/.config/foo",
            "/srv/keys",
            "~/.project-token",
            "/etc/x",
            "~/.y"
        ]
    );
    write(
        &user,
        "[sandbox]\nhide = [\"relative/path\", \"/ok\", \"~/../etc\", \"/\", \"~/\"]\n",
    );
    src.env.clear();
    src.flags.clear();
    let lines = invalid_lines(LoadedSettings::load(&src).unwrap_err());
    let file = user.display();
    assert_eq!(
        lines,
        [
            format!(
                "sandbox.hide[0] = \"relative/path\" (from {file}): must be an absolute path or start with ~/"
            ),
            format!("sandbox.hide[2] = \"~/../etc\" (from {file}): must not contain `..`"),
            format!(
                "sandbox.hide[3] = \"/\" (from {file}): must name something inside the root or the home, not either whole"
            ),
            format!(
                "sandbox.hide[4] = \"~/\" (from {file}): must name something inside the root or the home, not either whole"
            ),
        ]
    );
}

#[test]
fn a_ms_key_takes_a_duration_as_the_flags_do() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("corral.toml"),
        "[run]\nidle_watchdog_ms = \"5m\"\nwall_timeout_ms = \"2h\"\n[retry]\nbackoff_initial_ms = \"90s\"\nbackoff_max_ms = 600000\n",
    );
    let mut s = sources(dir.path());
    s.env = vec![("CORRAL_RUN__KILL_GRACE_MS".into(), "1500ms".into())];
    let loaded = LoadedSettings::load(&s).unwrap();
    assert_eq!(loaded.settings.run.idle_watchdog_ms, 300_000);
    assert_eq!(loaded.settings.run.wall_timeout_ms, 7_200_000);
    assert_eq!(loaded.settings.retry.backoff_initial_ms, 90_000);
    assert_eq!(loaded.settings.retry.backoff_max_ms, 600_000);
    assert_eq!(loaded.settings.run.kill_grace_ms, 1500);
}

#[test]
fn every_problem_of_a_bad_file_comes_in_one_pass_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("corral.toml"),
        "[run]\nprovder = \"claude\"\n  idle_watchdog_ms = \"5x\"\n\n[sandbx]\nx = 1\n\n[retry]\nrate_limit_retries = 20\n",
    );
    let err = LoadedSettings::load(&sources(dir.path())).unwrap_err();
    let text = err
        .to_string()
        .replace(&dir.path().display().to_string(), "<tmp>");
    insta::assert_snapshot!(text);
}

#[test]
fn limits_take_sizes_and_cores_and_a_bad_one_is_named_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("user.toml"),
        "[limits]\nmemory = \"2GiB\"\npids = 256\ncpus = \"1.5\"\ndisk = \"off\"\n",
    );
    let loaded = LoadedSettings::load(&sources(dir.path())).unwrap();
    let limits = loaded.settings.limits.resolve(Some(24 << 30), 2);
    assert_eq!(limits.memory, Some(2 << 30));
    assert_eq!(limits.pids, Some(256));
    assert_eq!(limits.cpu_millis, Some(1500));
    assert_eq!(limits.disk, None);
    // The defaults on a 2-core, 24 GiB machine: four spawns at once fit in its memory, and
    // none takes both cores.
    let defaults = corral_compose::LimitsSettings::default().resolve(Some(24 << 30), 2);
    assert!(defaults.memory.unwrap() * 4 < 24 << 30);
    assert_eq!(defaults.cpu_millis, Some(1000));
    assert_eq!(defaults.pids, Some(4096));
    write(
        &dir.path().join("user.toml"),
        "[limits]\nmemory = \"2 gigs\"\n",
    );
    let lines = invalid_lines(LoadedSettings::load(&sources(dir.path())).unwrap_err());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("user.toml:2") && lines[0].contains("limits.memory"),
        "{}",
        lines[0]
    );
}
