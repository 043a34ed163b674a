#!/usr/bin/env bash
# Builds side by side, each in turn, round after round, idle and then with a busy loop on every
# CPU: the rows whose verdicts wait for a many-core machine (a writer among 4 to 16 readers, the
# contended counter at 4 to 64 threads, the bounded queue, the key-value server's tail). Runs on
# a machine without a Rust toolchain, from `scripts/benchmarks.sh --export` folders:
#
#   scripts/benchmarks.sh --export devbench/new
#   git worktree add --detach /tmp/prev REV
#   (cd /tmp/prev && scripts/benchmarks.sh --export "$OLDPWD/devbench/prev")
#   scripts/device-ab.sh devbench/new devbench/prev
#
# or from the candidate builds of scripts/candidates/build.sh (devbench/candidates/*). Usage:
#
#   scripts/device-ab.sh [--rounds N] DIR DIR [DIR...]
#
# (devbench/ in .git/info/exclude; the device tool carries it with carry ["devbench"].) N
# (default 1) rounds, each running every build idle, then every build with the busy loops; the
# order of the builds rotates from round to round, so that no build always meets a fresher
# machine. Writes one file per example into $OUT (default target/device-ab), every run headed by
# its build's COMMIT and the load: rwlock.txt (`--quick --writers 1,4 --readers 4,8,16`),
# contention.txt (`--quick --threads 4,16,64`), condvar.txt (`--quick`), hackbench.txt
# (`--quick`) and kvcompare.txt
# (`--rounds 1 --seconds 1 --clients 16,64`, one worker per CPU, futexkit and std). A round runs
# every example twice per build, so size N to the device time left. Each run has a timeout of
# RUN_TIMEOUT seconds (default 90), so a hang costs one run, not the whole call.
# `python3 scripts/tables.py ab DIR/*.txt` then prints futexkit's figures row by row, every
# build's runs side by side.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=1
if [ "${1:-}" = --rounds ]; then
    rounds=${2:-}
    shift 2 || true
fi
if [ $# -lt 2 ]; then
    echo "usage: $0 [--rounds N] DIR DIR [DIR...]" >&2
    exit 2
fi
builds=("$@")
run_timeout=${RUN_TIMEOUT:-90}
out=${OUT:-target/device-ab}
for number in "$rounds" "$run_timeout"; do
    case $number in "" | *[!0-9]*) echo "N and RUN_TIMEOUT are whole numbers" >&2; exit 2 ;; esac
done
examples=(rwlock contention condvar hackbench kvcompare)
for dir in "${builds[@]}"; do
    for example in "${examples[@]}"; do
        [ -x "$dir/$example" ] || { echo "$dir/$example: not there (scripts/benchmarks.sh --export)" >&2; exit 1; }
    done
done
mkdir -p "$out"
cpus=$(nproc)

busy_pids=()
busy_on() {
    for _ in $(seq "$cpus"); do
        (while :; do :; done) &
        busy_pids+=($!)
    done
}
busy_off() {
    if [ ${#busy_pids[@]} -gt 0 ]; then
        kill "${busy_pids[@]}" 2>/dev/null || true
        wait "${busy_pids[@]}" 2>/dev/null || true
    fi
    busy_pids=()
}
trap busy_off EXIT

# run DIR LOAD ROUND: every example of the build in DIR once, appended to its file.
run() {
    local dir=$1 load=$2 round=$3 commit
    commit=$(cat "$dir/COMMIT" 2>/dev/null || echo "$dir")
    for example in "${examples[@]}"; do
        local args
        case $example in
        rwlock) args=(--quick --writers 1,4 --readers 4,8,16) ;;
        contention) args=(--quick --threads 4,16,64) ;;
        condvar | hackbench) args=(--quick) ;;
        kvcompare) args=(--rounds 1 --seconds 1 --clients 16,64 --workers "$cpus" --backends futexkit,std) ;;
        esac
        {
            echo "=== $commit, $load, round $round: $example ${args[*]}"
            timeout "$run_timeout" "$dir/$example" "${args[@]}" 2>&1 || echo "(exit status $?)"
            echo
        } >>"$out/$example.txt"
    done
}

for round in $(seq "$rounds"); do
    for load in idle busy; do
        [ "$load" = busy ] && busy_on
        for i in "${!builds[@]}"; do
            run "${builds[$(((i + round - 1) % ${#builds[@]}))]}" "$load" "$round"
        done
        busy_off
        echo "round $round, $load: done (${SECONDS}s)" >&2
    done
done
echo "wrote $(printf "$out/%s.txt " "${examples[@]}")" >&2
