#!/usr/bin/env bash
# Shows that the model checkers bite: each mutation below breaks the protocol of the Mutex
# (src/raw/mutex.rs), the RwLock (src/raw/rwlock.rs) or the process-shared Mutex
# (src/raw/shared/mutex.rs, which the shared RwLock's writer word and reader slots are too) in
# a way that loses a wake-up or strands a hand-off or a read phase, and loom's models of that
# lock (tests/model_mutex.rs, model_rwlock.rs or model_shared.rs; at most 3 preemptions, fewer
# where a model sets its own bound) must fail on every one of them. The shipped protocols run
# first and must pass, so that a failure means the mutation, not the model. (Two paths of the
# shared Mutex no loom model reaches, so none is listed: a timed locker's passing its wake on
# as it gives up, which the models' far deadlines never reach, and a writer's passing on a
# reader slot's wake, which needs more readers than slots; shuttle's
# shared_rwlock_writer_woken_on_a_taken_slot_passes_its_wake_on covers the second.)
#
#   scripts/mutations.sh [NAME...]      (default: every mutation; --list names them)
#
# Each mutation is one substitution in a copy of the current commit (a git worktree, removed
# afterwards); a substitution that no longer matches the code is reported as stale, and the
# script fails, so that the list follows the protocol. The builds share target/mutations.
# About 6 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

# NAME|LOCK|what it breaks|perl substitution on src/raw/LOCK.rs (loom's models of LOCK must
# catch it: tests/model_mutex.rs for mutex, model_rwlock.rs for rwlock, model_shared.rs for
# shared/...)
mutations=(
    "unlock-wakes-nobody|mutex|a contended unlock releases the lock and wakes no sleeper|s/(\.is_ok\(\)\n\s*\{\n(?:\s*\/\/[^\n]*\n)*)\s*let _ = Futex::wake_bitset_at\(addr, 1, ANY_WAITER\);/\$1/"
    "woken-takes-as-locked|mutex|a thread that slept takes a free lock as LOCKED, so its unlock wakes nobody|s/if slept \{ CONTENDED \} else \{ LOCKED \}/LOCKED/"
    "hand-off-wakes-nobody|mutex|an unlock from ASKED hands off and wakes nobody|s/let _ = Futex::wake_bitset_at\(addr, i32::MAX as u32, ASKING_WAITER\);//"
    "hand-off-wakes-one-asker|mutex|an unlock from ASKED wakes one asker, not every one an older waiter replaced|s/wake_bitset_at\(addr, i32::MAX as u32, ASKING_WAITER\)/wake_bitset_at(addr, 1, ASKING_WAITER)/"
    "asker-sleeps-unmarked|mutex|an asker sleeps without the ASKING_WAITER bitset, so a hand-off's wake misses it|s/None if sleep_on == naming\(ASKED, ticket\) => UNTIMED_WAITER \| ASKING_WAITER,//"
    "fair-unlock-hands-to-nobody|mutex|a fair unlock writes HANDED(0) even when its wake found no untimed sleeper|s/fair && self\.word\.wake_bitset\(1, UNTIMED_WAITER\) == Ok\(1\)/fair/"
    "timed-waiters-ask|mutex|a timed waiter asks, and may give up with the lock handed to it|s/let asks = deadline\.is_none\(\);/let asks = true;/"
    "last-reader-wakes-no-writer|rwlock|the last reader out, writers waiting, releases and wakes no writer|s/let _ = Futex::wake_bitset_at\(addr, 1, WRITER\);//"
    "upgrader-never-woken|rwlock|the read unlock that leaves the upgrader alone does not wake it|s/let _ = Futex::wake_bitset_at\(addr, 1, UPGRADER\);//"
    "release-wakes-no-writer|rwlock|a release that clears WRITERS_WAITING wakes the readers, never a writer|s/&& Futex::wake_bitset_at\(addr, 1, WRITER\)\.is_ok_and\(\|woken\| woken > 0\)/&& false/"
    "release-wakes-no-reader|rwlock|a release that leaves the lock free and wakes no writer does not wake the sleeping readers|s/(if !woke_writer && before & READERS_WAITING != 0 \{\n)\s*let _ = Futex::wake_bitset_at\(addr, i32::MAX as u32, ANY_READER\);/\$1/"
    "last-reader-keeps-lock-for-nobody|rwlock|the last reader out keeps WRITERS_WAITING although its wake found no writer|s/woke_writer = self\.state\.wake_bitset\(1, WRITER\) == Ok\(1\);/woke_writer = { let _ = self.state.wake_bitset(1, WRITER); true };/"
    "phase-opened-for-nobody|rwlock|a fair write unlock opens a read phase although its wake found no untimed reader|s/(UNTIMED_READER \| UNTIMED_UPGRADABLE\)\n\s*)\.is_ok_and\(\|woken\| woken > 0\)/\$1.is_ok()/"
    "fair-write-unlock-hands-to-nobody|rwlock|a fair write unlock sets HANDED although its wake found no untimed writer|s/&& self\.state\.wake_bitset\(1, UNTIMED_WRITER\) == Ok\(1\)/&& { let _ = self.state.wake_bitset(1, UNTIMED_WRITER); true }/"
    "downgrade-wakes-no-reader|rwlock|a downgrade with readers asleep does not wake them|s/(\/\/ This thread holds a read lock: the word is alive\.\n)\s*let _ = self\.state\.wake_bitset\(i32::MAX as u32, ANY_READER\);/\$1/"
    "woken-writer-drops-waiting-bit|rwlock|a writer that slept takes the lock clearing WRITERS_WAITING, though other writers may sleep|s/Exclusive::Writer if slept => \(state & !HANDED\) \| WRITE_LOCKED \| WRITERS_WAITING,/Exclusive::Writer if slept => ((state & !HANDED) | WRITE_LOCKED) & !WRITERS_WAITING,/"
    "shared-unlock-wakes-nobody|shared/mutex|a shared Mutex release of a word with WAITERS wakes nobody|s/(if before & WAITERS != 0 \{\n)\s*let _ = Futex::wake_at\(addr, wake\);/\$1/"
    "shared-woken-takes-without-bit|shared/mutex|a woken thread takes the shared word without WAITERS, so its release wakes nobody|s/let waiters = if woken \{ WAITERS \} else \{ 0 \};/let waiters = 0;/"
)
if [ "${1:-}" = --list ]; then
    for m in "${mutations[@]}"; do
        IFS='|' read -r name lock what _ <<<"$m"
        printf '%-34s %-12s %s\n' "$name" "$lock" "$what"
    done
    exit 0
fi

source "$repo/scripts/scratch-worktrees.sh"

export RUSTFLAGS="--cfg futexkit_loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR="$repo/target/mutations"
loom=(cargo test --quiet --release --features loom)

# models TREE LOCK LOG: builds and runs loom's models of LOCK (mutex, rwlock, shared/...) in
# TREE; 0 if they pass, 1 if they fail, 2 if the build fails.
models() {
    local test="model_${2%%/*}"
    (cd "$1" && "${loom[@]}" --test "$test" --no-run) >"$3" 2>&1 || return 2
    (cd "$1" && "${loom[@]}" --test "$test" -- --test-threads=1) >>"$3" 2>&1 || return 1
}

# One commit for the whole run, so that every mutation is of the code the shipped run checked.
base=$(git rev-parse HEAD)
tree=$trees/shipped
git worktree add --quiet --detach "$tree" "$base"
for lock in mutex rwlock shared; do
    echo "== shipped $lock protocol ($(git rev-parse --short "$base"))" >&2
    if ! models "$tree" "$lock" "$trees/shipped-$lock.log"; then
        tail -20 "$trees/shipped-$lock.log" >&2
        echo "the shipped $lock protocol fails its models: fix that first" >&2
        exit 1
    fi
    echo "passes" >&2
done

failed=0
for m in "${mutations[@]}"; do
    IFS='|' read -r name lock what substitution <<<"$m"
    if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
        continue
    fi
    tree=$trees/$name
    git worktree add --quiet --detach "$tree" "$base"
    perl -0pi -e "$substitution" "$tree/src/raw/$lock.rs"
    if git -C "$tree" diff --quiet; then
        echo "$name: STALE, its substitution no longer matches src/raw/$lock.rs" >&2
        failed=1
        continue
    fi
    start=$SECONDS
    set +e
    models "$tree" "$lock" "$trees/$name.log"
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
