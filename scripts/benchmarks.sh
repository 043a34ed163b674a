#!/usr/bin/env bash
# Regenerates docs/benchmarks.md: every comparison the examples make between futexkit, std and
# parking_lot (and threadpool and a key-value server on each), run on this machine now.
#
#   scripts/benchmarks.sh [--quick] [--against DIR] [--out FILE] [--only LIST]
#   scripts/benchmarks.sh --export DIR [--only LIST]
#   scripts/benchmarks.sh --prebuilt DIR [--against DIR] [--quick] [--out FILE] [--only LIST]
#
# --quick    shorter runs (a smoke test of the script, not figures to quote)
# --against  also build the examples of the futexkit checkout in DIR (say a previous release:
#            `git worktree add /tmp/prev <rev>`) and add its futexkit figures beside this
#            build's, from runs in the same session; the previous build's examples must take
#            the same arguments (contention, condvar, hackbench, kvcompare, uncontended; a
#            build whose example lacks --oversubscribed is left out of that busy section);
#            with --prebuilt, DIR is another --export's folder
# --out      where to write (default docs/benchmarks.md; the file is replaced, not appended)
# --only     a comma-separated list of the examples to run (pingpong,contention,...), and
#            threadpool for the threadpool section; the others are left out
# --export   builds the examples and copies them, with the commit they were built from, into
#            DIR, for a machine that has no Rust toolchain (with --only, just those examples)
# --prebuilt runs the examples that --export left in DIR instead of building them (no
#            valgrind or threadpool sections: they build their own)
#
# About an hour on 2 cores; nothing else should run meanwhile. valgrind (for instruction
# counts) is used if installed.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=""
against=""
out=docs/benchmarks.md
only=""
export_to=""
prebuilt=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick="--quick"; shift ;;
        --against) against="$(cd "$2" && pwd)"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --only) only=",$2,"; shift 2 ;;
        --export) export_to="$2"; shift 2 ;;
        --prebuilt) prebuilt="$2"; shift 2 ;;
        *)
            echo "usage: $0 [--quick] [--against DIR] [--out FILE] [--only LIST] | --export DIR | --prebuilt DIR ..." >&2
            exit 2
            ;;
    esac
done

# wanted NAME: whether --only (if given) names NAME.
wanted() { [ -z "$only" ] || [[ $only == *",$1,"* ]]; }

if [ -n "$prebuilt" ]; then
    ex=$prebuilt
    commit=$(cat "$prebuilt/COMMIT")
else
    cargo build --release --quiet --examples --features lock_api_05
    # Wherever cargo puts it (CARGO_TARGET_DIR, or a config's build.target-dir).
    ex="$(cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/examples"
    commit=$(git rev-parse --short HEAD)
    git diff --quiet HEAD -- src support examples || commit="$commit (with uncommitted changes)"
fi
if [ -n "$export_to" ]; then
    mkdir -p "$export_to"
    copied=0
    for source in examples/*.rs; do
        # Examples that need a feature this build leaves out (Cargo.toml's required-features)
        # are not built, and no section runs them.
        if [ -x "$ex/$(basename "$source" .rs)" ] && wanted "$(basename "$source" .rs)"; then
            cp "$ex/$(basename "$source" .rs)" "$export_to/"
            copied=$((copied + 1))
        fi
    done
    if [ "$copied" -eq 0 ]; then
        echo "no example found in $ex to export" >&2
        exit 1
    fi
    echo "$commit" >"$export_to/COMMIT"
    echo "exported the examples of $commit to $export_to" >&2
    exit 0
fi
prev_ex=""
prev_commit=""
prev_changed=""
if [ -n "$against" ] && [ -n "$prebuilt" ]; then
    prev_ex="$against"
    prev_commit=$(cat "$against/COMMIT")
elif [ -n "$against" ]; then
    # In its own target directory: a shared one would put both builds' examples in one place.
    (cd "$against" && CARGO_TARGET_DIR="$against/target" cargo build --release --quiet --examples)
    prev_ex="$against/target/release/examples"
    prev_commit=$(git -C "$against" rev-parse --short HEAD)
    git -C "$against" diff --quiet HEAD -- src support examples ||
        prev_changed=" (with uncommitted changes in src, support or examples)"
fi

cpus=$(nproc)
# The key-value server runs a worker per CPU, at least 4.
kv_workers=$((cpus > 4 ? cpus : 4))
model=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
virt=$( (lscpu 2>/dev/null || true) | sed -n 's/^Hypervisor vendor: *//p')
[ -n "$virt" ] || virt=$(systemd-detect-virt --vm 2>/dev/null || true)
if [ -n "$virt" ] && [ "$virt" != none ]; then virt="a virtual machine ($virt)"; else virt="no hypervisor detected"; fi
machine="$cpus CPUs ($model), Linux $(uname -r), $virt"
today=$(date -u +%Y-%m-%d)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
body="$tmp/body.md"
: >"$body"

# section TITLE EXAMPLE ARGS... : runs the example (and the previous build's, alternating which
# goes first) and appends its tables under TITLE, with the command, a summary and its reading.
order=0
section() {
    local title="$1" example="$2"
    shift 2
    wanted "$example" || return 0
    echo "== $title" >&2
    # A previous build whose example prints another table format is left out of that section.
    if [ -n "$prev_ex" ] && [ -x "$prev_ex/$example" ] && [ "${SKIP_PREVIOUS:-}" != "$example" ]; then
        if [ $((order % 2)) -eq 0 ]; then
            "$ex/$example" "$@" >"$tmp/cur.txt"
            "$prev_ex/$example" "$@" >"$tmp/prev.txt"
        else
            "$prev_ex/$example" "$@" >"$tmp/prev.txt"
            "$ex/$example" "$@" >"$tmp/cur.txt"
        fi
        order=$((order + 1))
        python3 scripts/tables.py merge "$tmp/cur.txt" "$tmp/prev.txt" "previous ($prev_commit)" >"$tmp/out.txt"
    else
        "$ex/$example" "$@" >"$tmp/cur.txt"
        cp "$tmp/cur.txt" "$tmp/out.txt"
    fi
    grep -m1 '^kernel .* cpus ' "$tmp/cur.txt" >"$tmp/caps.txt" || true
    {
        echo "## $title"
        echo
        # The one example that needs a feature (Cargo.toml's required-features) names it.
        local features=""
        [ "$example" = parking_lot_api ] && features=" --features lock_api_05"
        echo "\`cargo run --release$features --example $example${*:+ -- $*}\`"
        echo
        # The capabilities line is in the header of this file.
        grep -v '^kernel .* cpus ' "$tmp/out.txt"
        echo
        python3 scripts/tables.py summary "$tmp/cur.txt"
        echo
    } >>"$body"
}

# note EXAMPLE TEXT: the reading under EXAMPLE's section, if that section ran.
note() {
    wanted "$1" || return 0
    shift
    printf '%s\n\n' "$*" >>"$body"
}

# Builds before 6f3f31c print the median batch, not the mean: their table cannot be merged.
if [ -n "$prev_ex" ] && ! grep -q "fastest - slowest" "$prev_ex/pingpong" 2>/dev/null; then
    SKIP_PREVIOUS=pingpong
fi
section "Ping-pong: one round trip between two threads" pingpong $quick
SKIP_PREVIOUS=""
note pingpong "Reading: each mechanism against raw futex wake + wait, as the mean over fresh pairs of threads (total time over total round trips, so a slow batch counts), with the fastest and slowest batch in brackets. A spinning hand-off (Parker, swap) makes no syscall while both threads run; under oversubscription (one busy thread per CPU in the same process, then two) it must not be slower than sleeping, nor with both threads on one CPU, where the partner cannot run while its waiter spins: compare the two one-CPU rows (a Parker waiter on the CPU its partner last handed over from sleeps at once). futexkit's Mutex+Condvar is the same code as std's and parking_lot's rows: its waits spin while their spins pay and no thread on the machine waits for a CPU (src/spin/), so with busy threads it costs what std's does."

# lacks_busy EXAMPLE: prints EXAMPLE if the previous build's EXAMPLE lacks --oversubscribed (it
# would ignore the flag and run idle), for SKIP_PREVIOUS to leave it out of a busy section.
lacks_busy() {
    if [ -n "$prev_ex" ] && ! grep -q -- --oversubscribed "$prev_ex/$1" 2>/dev/null; then
        echo "$1"
    fi
}

# count BINARY ARGS...: the instructions the run executes (callgrind).
count() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 |
        sed -n 's/.*Collected : *//p'
}

if [ -z "$prebuilt" ] && wanted uncontended && command -v valgrind >/dev/null; then
    echo "== uncontended (callgrind)" >&2
    {
        echo "## Mutex and RwLock, uncontended: instructions per lock + unlock"
        echo
        echo "\`valgrind --tool=callgrind target/release/examples/uncontended IMPL 1000000\`, minus the same with 0 iterations, divided by 1,000,000 (IMPL with \`-read\` or \`-write\` after it for the RwLock's read or write lock + unlock)"
        echo
        if [ -n "$prev_ex" ]; then
            echo "| lock | futexkit | previous ($prev_commit) | std | parking_lot | parking_lot 0.13 |"
            echo "|---|---|---|---|---|---|"
        else
            echo "| lock | futexkit | std | parking_lot | parking_lot 0.13 |"
            echo "|---|---|---|---|---|"
        fi
        for kind in "" -read -write; do
            case $kind in
                "") line="| Mutex |" ;;
                -read) line="| RwLock read |" ;;
                -write) line="| RwLock write |" ;;
            esac
            for impl in futexkit previous std parking_lot parking_lot_0.13; do
                bin="$ex/uncontended"
                name=$impl$kind
                if [ "$impl" = previous ]; then
                    [ -n "$prev_ex" ] || continue
                    bin="$prev_ex/uncontended"
                    name=futexkit$kind
                fi
                # A build whose example lacks the kind says so (older ones still exit 0).
                if ! "$bin" "$name" 0 >/dev/null 2>&1 || "$bin" "$name" 0 2>&1 | grep -q unknown; then
                    line="$line - |"
                    continue
                fi
                a=$(count "$bin" "$name" 1000000)
                b=$(count "$bin" "$name" 0)
                line="$line $(python3 -c "print(f'{($a - $b) / 1e6:.1f}')") |"
            done
            echo "$line"
        done
        echo
        echo "Reading: instruction counts repeat exactly for the same binary, whatever else the machine does; times for the uncontended path are in the contended-counter table's and the read-only RwLock table's 1-thread rows and the writers-among-readers table's one writer alone. A futexkit read unlock loads the word before it subtracts, to see whether it must close a read phase or hand the lock to a waiting writer (src/raw/rwlock.rs)."
        echo
    } >>"$body"
fi

section "Mutex, contended counter" contention $quick
section "Mutex, contended counter, a busy thread on every CPU" contention $quick --oversubscribed
note contention "Reading: threads take one lock in a loop, with a short (one increment) or long (about 100 dependent steps) critical section and nothing between sections, or with 10 steps inside and 10 outside (parking_lot's own benchmark loop at work 10/10), first on an idle machine, then with a busy thread on every CPU; glibc's \`pthread_mutex_t\` never spins, the others spin briefly. Above the CPU count the machine is oversubscribed: parking_lot's waiters yield their CPU, futexkit's, std's and glibc's sleep; yielding, measured in futexkit, gained the short sections on a busy machine and lost the long ones, and gained nothing idle (docs/design.md, \"The lock waiter's rule, measured\"). The median thread's share says whether a lock's throughput comes from a few threads while the rest starve; the increments per handover, how many sections one thread runs in a row before another takes the lock, which moves the lock's cache line to another CPU (or waits for a woken sleeper): where the sections are short, throughput follows it. A futexkit waiter first looks at the lock after 8 spin hints, then after 16, 32 and 64, so that a holder that releases and retakes the lock at once finds it still its own (src/spin/mod.rs, \`FIRST_RUN\`); a later first look gains these short sections but leaves a lock that must change hands, as a queue's does, idle longer (docs/design.md, \"The lock waiter's rule, measured\")."

section "Condvar" condvar $quick
SKIP_PREVIOUS=$(lacks_busy condvar) section "Condvar, a busy thread on every CPU" condvar $quick --oversubscribed
note condvar "Reading: a notify with nobody asleep makes no syscall in futexkit, nor does one that comes while the sleepers an earlier notify woke are still waking up (that notify took their counts back when its wake returned); notify_all wakes every waiter, as std's does, and the waiters then meet on the Mutex. In the busy table a Condvar wait does not spin for its notify, as threads wait for a CPU there (src/spin/mod.rs)."

section "hackbench (Mutex + two Condvars per queue)" hackbench $quick
SKIP_PREVIOUS=$(lacks_busy hackbench) section "hackbench, a busy thread on every CPU" hackbench $quick --oversubscribed
note hackbench "Reading: 20 senders share each receiver's queue and notify after every message, so most notifies come while the receiver is already woken and on its way to a CPU. futexkit's Condvar knows that from the moment the waking notify's syscall returns and skips the wake (\`perf stat -e syscalls:sys_enter_futex\` counts the difference); parking_lot's keeps its waiters in a queue in user space and knows it too; std's calls the kernel at every notify. With far more threads than CPUs the times move by twofold between runs: compare within a row."

section "RwLock and Barrier" rwlock $quick
SKIP_PREVIOUS=$(lacks_busy rwlock) section "RwLock and Barrier, a busy thread on every CPU" rwlock $quick --oversubscribed
note rwlock "Reading: the writer's wait shows writer preference at work (new readers wait behind a waiting writer); readers in turn get the lock between writers (src/raw/rwlock.rs). Writers among readers, with more threads than CPUs, is decided by who gets a CPU: parking_lot's readers give theirs up (\`sched_yield\`) while a writer holds or waits, so its writers run nearly alone and its readers trail at 4 writers (slowest reader far under its side's average); futexkit's and std's waiters never yield, so both sides share the CPUs, and a writer's share can fall far under its side's average (the slowest writer), std's as well as futexkit's. A futexkit writer keeps new readers out from the start of its wait, as parking_lot's does (\`WRITER_SPINNING\`); on 2 CPUs that moves throughput from reads to writes, since a reader preempted in the lock keeps the spinning writer and the readers behind it waiting (docs/design.md, \"A writer among many readers, measured\"). With a busy thread on every CPU fewer of the lock's threads run at once, and every library's mixes run faster than idle, parking_lot's most: its waiters yield their CPU while they wait; futexkit's mixes trail it there, and neither candidate tried for them closed the gap, on 2 vCPUs or on 16 (docs/design.md, \"The RwLock's mixes on a busy machine, measured\" and \"The four candidates on 16 CPUs, measured\")."

section "parking_lot's API on futexkit (futexkit::parking_lot) and on parking_lot" parking_lot_api $quick
note parking_lot_api "Reading: the same code, written against parking_lot's API, with only the import path changed (\`futexkit::parking_lot\`, \`parking_lot\` 0.13 or 0.12, built with \`--features lock_api_05\`); idle, then with a busy thread on every CPU. The upgrade rows are the workload upgradable reads exist for: look under a read that excludes other upgraders and writers, then write only if needed, with no writer in between."

if [ -n "$quick" ]; then
    kv_args=(--rounds 1 --seconds 0.5 --workers "$kv_workers")
else
    kv_args=(--rounds 3 --clients 16,64,256 --workers "$kv_workers")
fi
section "A key-value server on each library (kvcompare)" kvcompare "${kv_args[@]}"
SKIP_PREVIOUS=$(lacks_busy kvcompare) section "A key-value server on each library (kvcompare), a busy thread on every CPU" \
    kvcompare "${kv_args[@]}" --oversubscribed
note kvcompare "Reading: the server and the load generator share this machine's CPUs over loopback, so a primitive that spins or yields takes CPU from the threads it waits for, and in the second table every thread also competes with a busy one per CPU; p99 is the column to watch, and on a small virtual machine it moves by up to twofold between runs of one build (docs/design.md, \"The oldest woken waiter asks, measured\"): compare within a table."

if [ -z "$prebuilt" ] && wanted threadpool; then
echo "== threadpool" >&2
{
    echo "## threadpool 1.8.1: \`execute(|| {}); join()\`"
    echo
    if [ -n "$against" ]; then
        echo "\`scripts/threadpool-bench.sh --rounds 5 --against $against\` (the third column: previous build $prev_commit)"
    else
        echo "\`scripts/threadpool-bench.sh --rounds 5\`"
    fi
    echo
    if [ -n "$against" ]; then
        scripts/threadpool-bench.sh --rounds 5 --against "$against" 2>"$tmp/tp.err"
    else
        scripts/threadpool-bench.sh --rounds 5 2>"$tmp/tp.err"
    fi
    echo
    grep -E '^workers' "$tmp/tp.err" | sed 's/^/- /'
    echo
    echo "Reading: the published crate with only its \`Mutex\`/\`Condvar\` import switched. Round trips are dominated by two wake-ups (the worker's, then the joiner's); the CPU time per round trip shows what waiting costs."
    echo
} >>"$body"
fi

section "Semaphore, Latch, events and PiMutex against what people use instead" toolbox $quick
section "Semaphore, Latch, events and PiMutex, a busy thread on every CPU" toolbox $quick --oversubscribed
note toolbox "Reading: the Semaphore against glibc's \`sem_t\` and the Mutex+Condvar semaphore a std or parking_lot user writes (2 permits, threads each taking one around 10 steps of work); the Latch in fork-join rounds against crossbeam-utils' \`WaitGroup\` and a Mutex+Condvar count; the events in a ping-pong against an \`eventfd\` and a Mutex+Condvar flag; the PiMutex against glibc's \`PTHREAD_PRIO_INHERIT\` mutex (the plain mutexes beside it are for scale: a contended PI lock always goes through the kernel, which is the price of the priority inheritance). Every object sits on cache lines of its own. On a virtual machine an idle CPU halts, and a wake-up that must start it costs tens of microseconds, which is what the idle ping-pong rows measure for every library alike."

section "Priority inversion: PiMutex against std's, futexkit's and glibc's locks" pi_inversion $quick
note pi_inversion "Reading: three SCHED_FIFO threads on CPU 0 (as root); the high-priority thread blocks on a lock that the low-priority thread holds, and a medium-priority thread spins. With a priority-inheritance lock (futexkit's PiMutex, glibc's PTHREAD_PRIO_INHERIT mutex) the holder runs at the waiter's priority and finishes its critical section, so the wait is about that section; with the others the medium thread keeps the holder, and so the waiter, off the CPU for its whole spell. tests/pi_mutex.rs checks the same order on every CI run."

if [ -z "$prebuilt" ] && wanted checks_cost; then
    echo "== checks cost" >&2
    # The same examples with each feature compiled in, in target directories of their own.
    cargo build --release --quiet --target-dir target/profile-on --features profile \
        --example checks_cost --example uncontended
    cargo build --release --quiet --target-dir target/deadlock-on --features deadlock \
        --example checks_cost --example uncontended
    profile_on=target/profile-on/release/examples
    deadlock_on=target/deadlock-on/release/examples
    {
        echo "## What the contention profile and the deadlock checks cost (features \`profile\`, \`deadlock\`)"
        echo
        echo "\`cargo run --release --example checks_cost -- $quick\`, the same with \`--features profile\` and with \`--features deadlock\`, run alternately (9 times each, as a few percent is what is measured and single runs here vary by 10%; the median of the nine medians); instructions by \`valgrind --tool=callgrind target/.../uncontended futexkit 1000000\` minus 0 iterations, per lock + unlock"
        echo
        echo "| futexkit Mutex, contended counter (Mops/s) | 4 threads | 16 threads |"
        echo "|---|---|---|"
        for i in 1 2 3 4 5 6 7 8 9; do
            "$ex/checks_cost" $quick >>"$tmp/cc_out.txt"
            "$profile_on/checks_cost" $quick >>"$tmp/cc_profile.txt"
            "$deadlock_on/checks_cost" $quick >>"$tmp/cc_deadlock.txt"
        done
        python3 - "$tmp/cc_out.txt" "$tmp/cc_profile.txt" "$tmp/cc_deadlock.txt" <<'PY'
import sys
rows = {}
for path in sys.argv[1:]:
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.setdefault(cells[0], []).append([float(c) for c in cells[1:]])
base = None
for label, runs in rows.items():
    med = [sorted(col)[len(col) // 2] for col in zip(*runs)]
    if base is None:
        base = med
    print(f"| {label} | " + " | ".join(f"{m:.2f} ({m / b:.2f})" for m, b in zip(med, base)) + " |")
PY
        if command -v valgrind >/dev/null; then
            line="| instructions per lock + unlock |"
            for run in "$ex/uncontended" "$profile_on/uncontended" "$deadlock_on/uncontended" \
                "$deadlock_on/uncontended checks-on"; do
                set -- $run
                a=$(count "$1" futexkit 1000000 ${2:-})
                b=$(count "$1" futexkit 0 ${2:-})
                line="$line $(python3 -c "print(f'{($a - $b) / 1e6:.1f}')") |"
            done
            echo
            echo "| | compiled out | profile compiled in (rate 0) | deadlock checks compiled in, off | deadlock checks on |"
            echo "|---|---|---|---|---|"
            echo "$line"
        fi
        echo
        echo "Reading: the figure in brackets is the row's ratio to compiled out. The profile hooks only the slow path of a contended acquisition, so the uncontended instruction count is the same with it compiled in; sampling off, a contended acquisition reads the rate once; sampled, it captures its stack (return addresses only) while it would wait anyway. That capture delays the sampled waiter as a back-off would, leaving the lock to the threads that run, so a high rate can raise this counter's throughput: the cost shows as longer waits, not fewer operations. The deadlock checks, turned off, read one flag per lock and per unlock; on, every acquisition and release updates the thread's record under a mutex of its own (src/deadlock/record.rs), a fixed cost per operation that a debugging build pays."
        echo
    } >>"$body"
fi

section "Process-shared, robust locks: futexkit::shared against glibc's robust pthread locks" shared_locks $quick
note shared_locks "Reading: both sides are robust and process-shared (glibc's mutex with PTHREAD_PROCESS_SHARED and PTHREAD_MUTEX_ROBUST, its condition variable with PTHREAD_PROCESS_SHARED), and both keep every lock word on the thread's robust list; futexkit's in-process locks between threads are beside them for scale. Contended: both take a lock in passing without WAITERS, so releasing it makes no system call; futexkit's waiter spins briefly before it sleeps, glibc's does not, and futexkit's sleepers look at the word every 100 ms, so that a woken waiter killed before it ran cannot strand them (src/raw/shared/mutex.rs, invariant 2). The death row is the kernel's work for both: the robust list walked at the holder's exit, one waiter woken."

if [ -z "$prebuilt" ] && wanted shared_locks && command -v valgrind >/dev/null; then
    echo "== shared uncontended (callgrind)" >&2
    {
        echo "## Process-shared mutex, uncontended: instructions per lock + add + unlock"
        echo
        echo "\`valgrind --tool=callgrind target/release/examples/shared_locks uncontended IMPL 1000000\`, minus the same with 0 iterations, divided by 1,000,000"
        echo
        echo "| futexkit shared | pthread robust | futexkit in-process |"
        echo "|---|---|---|"
        line="|"
        for impl in futexkit-shared pthread-robust futexkit; do
            a=$(count "$ex/shared_locks" uncontended "$impl" 1000000)
            b=$(count "$ex/shared_locks" uncontended "$impl" 0)
            line="$line $(python3 -c "print(f'{($a - $b) / 1e6:.1f}')") |"
        done
        echo "$line"
        echo
        echo "Reading: futexkit's take is one CAS plus its robust-list bookkeeping (the pending entry, then linking the word between private anchors); glibc's does the same on its own list. Each adds 1 to the guarded value: futexkit copies a u64 in and out with one atomic access each."
        echo
    } >>"$body"
fi

section "FlipCall round trip, in one process and across two" flipcall_ipc $quick
note flipcall_ipc "Reading: one process should be no slower than two (in-process / cross-process at most about 1), and FlipCall faster than raw wake + wait at every size. A shared window's copies are atomic (a peer process may write it at any moment), which costs against memcpy only below 1 KiB. Oversubscribed figures on a 2-CPU virtual machine move between runs by several times, in both directions: a pair either keeps spinning past each other or falls into sleeping and waking every call."

section "Copies into and out of shared memory: futexkit's own against atomic-memcpy" atomic_copy $quick
note atomic_copy "Reading: every byte of a range a peer process may write must be read and written atomically; futexkit copies whole words with relaxed atomics between byte-wise edges and, from 1 KiB, with one \`rep movsb\` (src/atomic_copy.rs), atomic-memcpy (the crate that offers the same guarantee) copies through its own word loop. Above 1 futexkit's copy is faster, which is why the crate keeps its own rather than depend on atomic-memcpy. memcpy is the floor: what a copy costs when nothing may race it."

section "FlipCall: one server thread for many channels" flipcall_server $quick
note flipcall_server "Reading: client threads each call as fast as they can on their own channel (64-byte requests and replies). One flipcall::Server thread against a FlipCall server thread per channel and against one thread serving Unix seqpacket sockets with epoll. With many clients the clients outnumber the CPUs, so fairness shows how the scheduler shared the CPUs among clients as much as the server's round robin."

section "A directed hand-off through seccomp user notifications (SYNC_WAKE_UP)" seccomp_handoff $quick
note seccomp_handoff "Reading: a filtered client thread's one intercepted call is answered by a supervisor (a thread, or a forked child holding the listener); with SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6) each wake-up goes to the waker's CPU, so the pair shares one CPU, as wake+wait pinned to one CPU does: compare those two rows. futexkit's hand-offs do not use it: docs/kernel.md (seccomp user notifications) has the opt-in FlipCall mode that was built on it, its figures, and why it was taken out."

{
    echo "# Benchmarks"
    echo
    if [ -n "$prebuilt" ]; then
        echo "Every table below comes from one run of \`scripts/benchmarks.sh --prebuilt DIR${against:+ --against PREVIOUS_DIR}${quick:+ $quick}${only:+ --only ${only:1:-1}}\` on a machine without a Rust toolchain, with the examples that \`scripts/benchmarks.sh --export DIR\` built elsewhere; it regenerates this whole file (it is replaced, never appended)."
    else
        echo "Every table below comes from one run of \`scripts/benchmarks.sh${quick:+ $quick}${against:+ --against DIR}${only:+ --only ${only:1:-1}}\`, which regenerates this whole file (it is replaced, never appended): run it on your own machine to get yours."
    fi
    echo
    echo "- commit: $commit${prev_commit:+; previous build: $prev_commit$prev_changed}"
    echo "- machine: $machine"
    # The capabilities come from an example's output: an --only that runs none has none.
    if [ -s "$tmp/caps.txt" ]; then
        echo "- what the kernel offers (\`cargo run --example probe\` says how each was decided): \`$(cat "$tmp/caps.txt")\`"
    fi
    echo "- date: $today"
    echo
    echo "parking_lot is parking_lot 0.12, the release most dependents still build with; the Mutex and parking_lot-API tables have the current release, 0.13, beside it."
    echo
    echo "futexkit / best is futexkit's figure against the best of the other libraries in its table (std's and parking_lot's, glibc's and parking_lot 0.13's too where the table has them): above 1, futexkit is ahead. Each example interleaves the libraries round by round, each round starting with the next library (so that none always runs first), and reports medians or means (each table says which); single figures on a shared or virtual machine move from run to run, ratios within one run much less."
    echo
    cat "$body"
} >"$out"
echo "wrote $out" >&2
