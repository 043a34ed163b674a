#!/usr/bin/env bash
# Shows that the model checkers bite: each mutation below breaks the Mutex protocol
# (src/raw/mutex.rs) in a way that loses a wake-up or strands a hand-off, and loom's Mutex
# models (tests/model_mutex.rs, 3 preemptions) must fail on every one of them. The shipped
# protocol runs first and must pass, so that a failure means the mutation, not the model.
#
#   scripts/mutations.sh [NAME...]      (default: every mutation; --list names them)
#
# Each mutation is one substitution in a copy of the current commit (a git worktree, removed
# afterwards); a substitution that no longer matches the code is reported as stale, and the
# script fails, so that the list follows the protocol. The builds share target/mutations.
# About 4 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

# NAME|what it breaks|perl substitution on src/raw/mutex.rs
mutations=(
    "unlock-wakes-nobody|a contended unlock releases the lock and wakes no sleeper|s/(\.is_ok\(\)\n\s*\{\n(?:\s*\/\/[^\n]*\n)*)\s*let _ = Futex::wake_bitset_at\(addr, 1, ANY_WAITER\);/\$1/"
    "woken-takes-as-locked|a thread that slept takes a free lock as LOCKED, so its unlock wakes nobody|s/if slept \{ CONTENDED \} else \{ LOCKED \}/LOCKED/"
    "hand-off-wakes-nobody|an unlock from ASKED hands off and wakes nobody|s/let _ = Futex::wake_bitset_at\(addr, i32::MAX as u32, ASKING_WAITER\);//"
    "hand-off-wakes-one-asker|an unlock from ASKED wakes one asker, not every one an older waiter replaced|s/wake_bitset_at\(addr, i32::MAX as u32, ASKING_WAITER\)/wake_bitset_at(addr, 1, ASKING_WAITER)/"
    "asker-sleeps-unmarked|an asker sleeps without the ASKING_WAITER bitset, so a hand-off's wake misses it|s/None if sleep_on == naming\(ASKED, ticket\) => UNTIMED_WAITER \| ASKING_WAITER,//"
    "fair-unlock-hands-to-nobody|a fair unlock writes HANDED(0) even when its wake found no untimed sleeper|s/fair && self\.word\.wake_bitset\(1, UNTIMED_WAITER\) == Ok\(1\)/fair/"
    "timed-waiters-ask|a timed waiter asks, and may give up with the lock handed to it|s/let asks = deadline\.is_none\(\);/let asks = true;/"
)

if [ "${1:-}" = --list ]; then
    for m in "${mutations[@]}"; do
        IFS='|' read -r name what _ <<<"$m"
        printf '%-28s %s\n' "$name" "$what"
    done
    exit 0
fi

source "$repo/scripts/scratch-worktrees.sh"

export RUSTFLAGS="--cfg futexkit_loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR="$repo/target/mutations"
loom=(cargo test --quiet --release --features loom --test model_mutex)

# models TREE LOG: builds and runs loom's Mutex models in TREE; 0 if they pass, 1 if they
# fail, 2 if the build fails.
models() {
    (cd "$1" && "${loom[@]}" --no-run) >"$2" 2>&1 || return 2
    (cd "$1" && "${loom[@]}" -- --test-threads=1) >>"$2" 2>&1 || return 1
}

tree=$trees/shipped
git worktree add --quiet --detach "$tree" HEAD
echo "== shipped protocol ($(git rev-parse --short HEAD))" >&2
if ! models "$tree" "$trees/shipped.log"; then
    tail -20 "$trees/shipped.log" >&2
    echo "the shipped protocol fails its models: fix that first" >&2
    exit 1
fi
echo "passes" >&2

failed=0
for m in "${mutations[@]}"; do
    IFS='|' read -r name what substitution <<<"$m"
    if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
        continue
    fi
    tree=$trees/$name
    git worktree add --quiet --detach "$tree" HEAD
    perl -0pi -e "$substitution" "$tree/src/raw/mutex.rs"
    if git -C "$tree" diff --quiet; then
        echo "$name: STALE, its substitution no longer matches src/raw/mutex.rs" >&2
        failed=1
        continue
    fi
    start=$SECONDS
    set +e
    models "$tree" "$trees/$name.log"
    rc=$?
    set -e
    case $rc in
        1)
            # The models that panicked (a test's thread is named after it; loom's deadlock
            # report may abort the run before libtest lists its failures) and the first
            # panic's message (the line after "panicked at").
            panicked=$(grep -o "^thread '[a-z0-9_]*'" "$trees/$name.log" | cut -d"'" -f2 |
                sort -u | tr '\n' ' ')
            why=$(grep -m1 -A1 'panicked at' "$trees/$name.log" | tail -1 | cut -c1-100 || true)
            echo "$name: caught in $((SECONDS - start)) s ($what), by ${panicked:-?}; first panic: $why" >&2
            ;;
        0)
            echo "$name: MISSED ($what): every model passes" >&2
            failed=1
            ;;
        *)
            echo "$name: does not build" >&2
            tail -5 "$trees/$name.log" >&2
            failed=1
            ;;
    esac
done
exit $failed
