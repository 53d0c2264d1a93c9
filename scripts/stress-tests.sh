#!/usr/bin/env bash
# Runs the whole test suite (`cargo test --workspace`) several times with a CPU hog on every core, as a busy CI
# machine would, reports each run's outcome, and checks that no process the suite starts outlives it: `headstart`
# worker/run/replay/bench processes, throwaway PostgreSQL servers (`postgres -D <temp dir>/headstart-pg-…`) and
# their guardians, the MCP reference server (server-everything), Python MCP scripts, and the SIGKILL test's child.
# Exits non-zero when a run fails or a process is left behind.
#
# Usage: scripts/stress-tests.sh [arguments for cargo test, e.g. -- --test-threads=4]
# Environment:
#   STRESS_RUNS     how many runs (default 3)
#   STRESS_HOGS     how many CPU hogs (default: one per core, `nproc`)
#   STRESS_TIMEOUT  seconds a run may take before it is stopped and counted as failed (default 3600)
#   STRESS_GRACE    seconds a leftover process gets to go away after a run (default 15: a throwaway PostgreSQL is
#                   stopped by its guardian after the test process ends)
# Everything else (HEADSTART_REQUIRE_POSTGRES, DATABASE_URL, CARGO_TARGET_DIR, …) reaches the tests as usual. The
# runs' output is kept in a temporary folder, named at the end.
set -u

cd "$(dirname "$0")/.."

runs=${STRESS_RUNS:-3}
hogs=${STRESS_HOGS:-$(nproc)}
run_timeout=${STRESS_TIMEOUT:-3600}
grace=${STRESS_GRACE:-15}
logs=$(mktemp -d "${TMPDIR:-/tmp}/headstart-stress.XXXXXX")

# What the suite starts, as `pgrep -f` patterns over full command lines.
patterns=(
    '(^|/)headstart (worker|run|resume|replay|bench|submit|mcp) '
    'postgres -D .*/headstart-pg-'
    'headstart-pg-guardian'
    'server-everything'
    'python[0-9.]* .*mcp'
    'child_commits_then_waits'
)

hog_pids=()
start_hogs() {
    for _ in $(seq "$hogs"); do
        yes >/dev/null &
        hog_pids+=("$!")
    done
}
stop_hogs() {
    if [ "${#hog_pids[@]}" -gt 0 ]; then
        kill "${hog_pids[@]}" 2>/dev/null
        wait "${hog_pids[@]}" 2>/dev/null
    fi
    hog_pids=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM

# The ids of the processes matching the patterns, one per line, sorted.
suite_processes() {
    for pattern in "${patterns[@]}"; do
        pgrep -f -- "$pattern"
    done | grep -vx "$$" | sort -u
}

# The processes matching now that did not before the runs (a developer's own may be running), after a grace
# period; prints them with their command lines.
leftovers() {
    local deadline=$((SECONDS + grace)) left
    while :; do
        left=$(comm -13 "$logs/before.pids" <(suite_processes))
        if [ -z "$left" ] || [ "$SECONDS" -ge "$deadline" ]; then
            break
        fi
        sleep 1
    done
    for pid in $left; do
        ps -o pid=,etime=,args= -p "$pid" 2>/dev/null
    done
}

# Compile first, without the hogs: the runs measure the tests, not the compiler.
echo "stress: building the test binaries"
if ! cargo test --workspace --no-run "$@" >"$logs/build.log" 2>&1; then
    tail -n 30 "$logs/build.log"
    echo "stress: the build failed (log: $logs/build.log)"
    exit 1
fi

suite_processes >"$logs/before.pids"
failed=0
for run in $(seq "$runs"); do
    start_hogs
    started=$SECONDS
    timeout --kill-after=30 "$run_timeout" cargo test --workspace "$@" >"$logs/run-$run.log" 2>&1
    status=$?
    stop_hogs
    took=$((SECONDS - started))
    passed=$(grep -o '[0-9]* passed' "$logs/run-$run.log" | awk '{sum += $1} END {print sum + 0}')
    failing=$(grep -o '[0-9]* failed' "$logs/run-$run.log" | awk '{sum += $1} END {print sum + 0}')
    if [ "$status" -eq 0 ]; then
        echo "stress: run $run/$runs passed in ${took} s ($passed tests passed, $hogs CPU hogs)"
    else
        failed=1
        echo "stress: run $run/$runs FAILED (exit $status) in ${took} s ($passed passed, $failing failed):"
        grep -E '^test .* FAILED$|^---- .* stdout ----$|panicked at' "$logs/run-$run.log" | head -n 20
    fi
    left=$(leftovers)
    if [ -n "$left" ]; then
        failed=1
        echo "stress: run $run/$runs left processes running:"
        echo "$left"
    fi
done

echo "stress: logs in $logs"
if [ "$failed" -ne 0 ]; then
    echo "stress: FAILED"
    exit 1
fi
echo "stress: all $runs runs passed and left nothing running"
