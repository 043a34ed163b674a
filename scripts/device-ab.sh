#!/usr/bin/env bash
# Two builds side by side, each in turn, round after round, idle and then with a busy loop on
# every CPU: the rows whose verdicts wait for a many-core machine (a writer among 4 to 16
# readers, the contended counter at 4 to 64 threads, the key-value server's tail). Runs on a
# machine without a Rust toolchain, from two `scripts/benchmarks.sh --export` folders:
#
#   scripts/benchmarks.sh --export devbench/new
#   git worktree add --detach /tmp/prev REV
#   (cd /tmp/prev && scripts/benchmarks.sh --export "$OLDPWD/devbench/prev")
#   scripts/device-ab.sh devbench/new devbench/prev [ROUNDS]
#
# (devbench/ in .git/info/exclude; the device tool carries it with carry ["devbench"].) ROUNDS
# (default 2) rounds, each running both builds idle, then both with the busy loops. Writes one
# file per example into $OUT (default target/device-ab), every run headed by its build's commit
# and the load: rwlock.txt (`--quick --writers 1,4 --readers 4,8,16`), contention.txt (`--quick
# --threads 4,16,64`) and kvcompare.txt (`--rounds 1 --seconds 1 --clients 16,64`, one worker
# per CPU, futexkit and std). A round runs every example four times, so size ROUNDS to the
# device time left. Each run has a timeout of RUN_TIMEOUT seconds (default 90), so a hang costs
# one run, not the whole call.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 2 ]; then
    echo "usage: $0 NEW_DIR PREV_DIR [ROUNDS]" >&2
    exit 2
fi
new=$1
prev=$2
rounds=${3:-2}
run_timeout=${RUN_TIMEOUT:-90}
out=${OUT:-target/device-ab}
case "$rounds$run_timeout" in *[!0-9]*) echo "ROUNDS and RUN_TIMEOUT are whole numbers" >&2; exit 2 ;; esac
for dir in "$new" "$prev"; do
    for example in rwlock contention kvcompare; do
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
    for example in rwlock contention kvcompare; do
        local args
        case $example in
        rwlock) args=(--quick --writers 1,4 --readers 4,8,16) ;;
        contention) args=(--quick --threads 4,16,64) ;;
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
        # Which build goes first alternates, so that neither always meets a fresher machine.
        if [ $((round % 2)) -eq 1 ]; then
            run "$new" "$load" "$round"
            run "$prev" "$load" "$round"
        else
            run "$prev" "$load" "$round"
            run "$new" "$load" "$round"
        fi
        busy_off
        echo "round $round, $load: done (${SECONDS}s)" >&2
    done
done
echo "wrote $out/rwlock.txt, $out/contention.txt, $out/kvcompare.txt" >&2
