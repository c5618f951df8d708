#!/bin/sh
# The processes a Ray worker starts for one task (issue 38): `strace -f -e trace=execve` around one
# `corral sprint work`, one task of one round, the sprint benches' 2-s stand-in for Claude Code,
# evaluator off, a `file://` bare remote, no gate. Prints the total and the count per program, and
# with `-v` every command line in order.
#
#   crates/cli/benches/worker_processes.sh [-v] [-g SECONDS] [path/to/corral]
#
# The corral binary defaults to `$CARGO_TARGET_DIR/debug/corral` (else `target/debug/corral`).
# Needs strace and git; runs the default sandbox (bubblewrap) as `corral sprint work` does. The
# stand-in and the sprint are those of `crates/cli/benches/common/parallel.rs` (one task).
# With `-g SECONDS` the worker is started ahead, at a gate the script opens SECONDS later (as the
# Ray executor does for the tasks it starts ahead of a free slot).
set -eu

verbose=
gate_s=
while [ $# -gt 0 ]; do
    case $1 in
    -v) verbose=1; shift ;;
    -g) gate_s=$2; shift 2 ;;
    *) break ;;
    esac
done
corral=${1:-${CARGO_TARGET_DIR:-target}/debug/corral}
case $corral in /*) ;; *) corral=$(pwd)/$corral ;; esac
[ -x "$corral" ] || { echo "no corral binary at $corral (build it: cargo build -p corral-cli)" >&2; exit 2; }
command -v strace >/dev/null || { echo "strace is not installed" >&2; exit 2; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/home" "$root/tmp" "$root/project"

cat >"$root/claude" <<'EOF'
#!/bin/sh
if [ "$1" = "--version" ]; then echo "2.1.197 (Claude Code)"; exit 0; fi
PROMPT=$(cat)
SIGNALS=$(printf '%s\n' "$PROMPT" | grep -o '/[^`]*signals\.json' | head -n 1)
R=${SIGNALS%/generator/signals.json}; T=${R%/rounds/*}; TASK=${T##*/}
echo '{"type":"system","subtype":"init","session_id":"0b8f5a7e-3c1d-4e2f-9a6b-5d4c3b2a1f00","model":"claude-opus-4-8"}'
sleep 2
echo done > "$TASK.txt"
printf '%s' '{"schemaVersion":1,"signals":[{"type":"task-complete","timestamp":"2026-12-01T10:00:00Z"}]}' > "$SIGNALS"
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"0b8f5a7e-3c1d-4e2f-9a6b-5d4c3b2a1f00","total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":5}}'
EOF
chmod 755 "$root/claude"

cd "$root/project"
printf 'bench\n' >README
printf '.corral/\n' >.gitignore
cat >corral-sprint.toml <<'EOF'
[sprint]
name = "bench"
check = "! grep -qs TODO *.txt"
check_timeout_ms = 30000
max_rounds = 1
max_attempts = 1

[roles.generator]
provider = "claude"

[roles.evaluator]
provider = "claude"
enabled = false

[[tasks]]
id = "t1"
title = "Task t1"
prompt = "Write t1.txt."
EOF
export GIT_AUTHOR_NAME=Bench GIT_AUTHOR_EMAIL=bench@example.invalid
export GIT_COMMITTER_NAME=Bench GIT_COMMITTER_EMAIL=bench@example.invalid
git init --quiet --initial-branch=main
git add --all
git commit --quiet -m start
base=$(git rev-parse HEAD)
git init --quiet --bare "$root/remote.git"
git push --quiet "file://$root/remote.git" main

sandbox_env=
[ "$(id -u)" = 0 ] && sandbox_env="IS_SANDBOX=1"
gate_args=
if [ -n "$gate_s" ]; then
    gate=refs/corral/bench/t1/gate/job-1
    gate_args="--gate $gate"
    (sleep "$gate_s"; git -C "$root/remote.git" update-ref "$gate" "$base") &
fi
env -i PATH="$PATH" HOME="$root/home" TMPDIR="$root/tmp" ANTHROPIC_API_KEY=sk-bench \
    CORRAL_PROVIDERS__CLAUDE__COMMAND="$root/claude" $sandbox_env \
    GIT_AUTHOR_NAME=Bench GIT_AUTHOR_EMAIL=bench@example.invalid \
    GIT_COMMITTER_NAME=Bench GIT_COMMITTER_EMAIL=bench@example.invalid \
    strace -f -qq -e trace=execve -e signal=none -o "$root/trace" \
    "$corral" sprint work --json --remote "file://$root/remote.git" \
    --sprint-file corral-sprint.toml --task t1 --base "$base" \
    --branch corral/bench.tasks/t1 --run-id run-count --work-dir "$root/node" $gate_args \
    >"$root/out" 2>"$root/err" || {
    echo "corral sprint work failed:" >&2
    cat "$root/err" >&2
    exit 1
}
grep -q '"kind":"handback".*"status":"done"' "$root/out" || {
    echo "the task was not done:" >&2
    cat "$root/out" "$root/err" >&2
    exit 1
}

# Successful execs only (a PATH search tries several directories; `= 0` is the one that ran),
# the first one (corral itself) left out.
grep 'execve(' "$root/trace" | grep '= 0$' | tail -n +2 >"$root/execs"
# Each line: the program's name, then the git subcommand for git (the word after the options).
sed -E 's/^[0-9]+ +execve\("([^"]*)", \[(.*)\], .*$/\1\t\2/' "$root/execs" |
    awk -F'\t' '{
        n = split($1, p, "/"); prog = p[n]
        if (prog == "git") {
            rest = $2; sub(/^"[^"]*"(, )?/, "", rest)
            sub_cmd = ""
            while (match(rest, /^"[^"]*"(\.\.\.)?/)) {
                w = substr(rest, 2, RLENGTH - 2); sub(/"\.\.\.?$/, "", w)
                rest = substr(rest, RLENGTH + 1); sub(/^, /, "", rest)
                if (w == "-c" || w == "-C") { if (match(rest, /^"[^"]*"(\.\.\.)?/)) { rest = substr(rest, RLENGTH + 1); sub(/^, /, "", rest) }; continue }
                if (w ~ /^-/) continue
                sub_cmd = w; break
            }
            prog = "git " sub_cmd
        }
        print prog
    }' >"$root/names"
echo "processes started by one corral sprint work (corral itself not counted): $(wc -l <"$root/execs")"
sort "$root/names" | uniq -c | sort -rn
if [ -n "$verbose" ]; then
    echo
    sed -E 's/^[0-9]+ +execve\("[^"]*", \[(.*)\], .*$/\1/' "$root/execs"
fi
