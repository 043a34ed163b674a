#!/usr/bin/env bash
# Guest repeat: runs one test binary many times in a kernel booted under qemu, to catch rare
# hangs that only a slow guest's scheduling shows (a Condvar requeue race hung 2 of 150 runs of
# the Condvar tests under TCG, and none of 2,200 native runs). On a hang it prints every
# thread's state and `/proc/PID/task/TID/syscall` (for a futex call: the address and the value
# the thread sleeps on) and the words around each futex address, then kills the run and goes on.
#
# Usage: scripts/guest-repeat.sh KERNEL TEST [RUNS] [FILTER]
#   KERNEL  a vmlinuz, e.g. the 5.10 one `scripts/kernel-matrix.sh bullseye` fetched:
#           target/kernel-matrix/kernels/linux-image-5.10.0-32-amd64/boot/vmlinuz-5.10.0-32-amd64
#   TEST    a test binary's name: condvar, mutex, ... (tests/*.rs), futexkit (the unit tests)
#   RUNS    how many runs (default 150); FILTER: a test name filter (default: every test)
# Environment: GR_HANG seconds after which a run counts as hung (default 300), GR_ACCEL
# (default tcg,thread=multi), GR_TIMEOUT seconds for the whole guest (default 4 h).
# Needs qemu-system-x86_64, cpio, and the busybox that scripts/kernel-matrix.sh fetches. The
# console goes to target/kernel-matrix/logs/repeat-TEST.log. Exits non-zero if a run hung or
# failed, or the guest did not finish.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/guest-common.sh
source scripts/guest-common.sh

(($# >= 2)) || { sed -n '8,17p' "$0" >&2; exit 2; }
KERNEL=$1 TEST=$2 RUNS=${3:-150} FILTER=${4:-}
HANG=${GR_HANG:-300} GUEST_TIMEOUT=${GR_TIMEOUT:-14400}
CACHE=target/kernel-matrix
BUSYBOX=$CACHE/busybox/busybox
LOG=$CACHE/logs/repeat-$TEST.log
[[ -f $KERNEL ]] || { echo "guest-repeat: no kernel at $KERNEL" >&2; exit 1; }
[[ -x $BUSYBOX ]] || { echo "guest-repeat: run scripts/kernel-matrix.sh once for $BUSYBOX" >&2; exit 1; }
[[ $TEST =~ ^[a-z0-9_]+$ && $FILTER =~ ^[a-z0-9_:]*$ ]] ||
    { echo "guest-repeat: TEST is a binary's name, FILTER a test path ([a-z0-9_:])" >&2; exit 1; }
[[ $RUNS =~ ^[0-9]+$ && $HANG =~ ^[1-9][0-9]*$ && $GUEST_TIMEOUT =~ ^[1-9][0-9]*$ ]] ||
    { echo "guest-repeat: RUNS, GR_HANG and GR_TIMEOUT are numbers" >&2; exit 1; }

# The build's errors go to the terminal; only the executables' paths are kept.
bin=$(cargo test --no-run --message-format=json |
    grep -o '"executable":"[^"]*/deps/'"$TEST"'-[^"]*"' | cut -d'"' -f4 | head -n1) || true
[[ -n $bin ]] || { echo "guest-repeat: cargo test --no-run built no test binary $TEST" >&2; exit 1; }

root=$CACHE/repeat-root
rm -rf "$root"
mkdir -p "$root"/{bin,proc,sys,dev,tmp,km} "$CACHE/logs"
cp "$BUSYBOX" "$root/bin/busybox"
copy_with_libs "$bin" "$root" /km/test
{
    guest_init_prelude
    cat <<'EOF'
for arg in $(cat /proc/cmdline); do
    case $arg in
    gr_runs=*) RUNS=${arg#gr_runs=} ;;
    gr_hang=*) HANG=${arg#gr_hang=} ;;
    gr_filter=*) FILTER=${arg#gr_filter=} ;;
    esac
done
echo "GR-BOOTED $(uname -r) cpus $(nproc) runs $RUNS filter '$FILTER'"
i=0 hangs=0 failures=0
while [ "$i" -lt "$RUNS" ]; do
    i=$((i + 1))
    /km/test $FILTER --test-threads=2 >/tmp/out 2>&1 &
    pid=$!
    t=0
    while [ "$t" -lt "$HANG" ] && kill -0 "$pid" 2>/dev/null; do
        sleep 1
        t=$((t + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        hangs=$((hangs + 1))
        echo "GR-HANG run $i (over ${HANG}s)"
        grep -v ' ok$' /tmp/out | tail -n 5
        for task in /proc/$pid/task/*; do
            echo "  tid ${task##*/} state $(cut -d' ' -f3 "$task/stat") syscall $(cat "$task/syscall")"
        done
        for task in /proc/$pid/task/*; do
            set -- $(cat "$task/syscall")
            [ "$1" = 202 ] || continue
            base=$((($2 / 8) * 8 - 32))
            printf '  words from %x:' "$base"
            dd if=/proc/$pid/mem bs=8 skip=$((base / 8)) count=10 2>/dev/null | od -An -tx4 | tr -s '\n' ' '
            echo
        done
        kill -9 "$pid"
        wait "$pid" 2>/dev/null || true
    elif ! wait "$pid"; then
        failures=$((failures + 1))
        echo "GR-FAIL run $i"
        grep -v ' ok$' /tmp/out | tail -n 20
    fi
    [ $((i % 10)) -ne 0 ] || echo "GR-PROGRESS $i runs, $hangs hung, $failures failed"
done
echo "GR-DONE $i runs, $hangs hung, $failures failed"
poweroff -f
EOF
} >"$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$CACHE/repeat.cpio.gz"

echo "guest-repeat: $RUNS runs of $(basename "$bin") ${FILTER:+(filter $FILTER) }on $(basename "$KERNEL"); console: $LOG"
start=$SECONDS
accel=${GR_ACCEL:-tcg,thread=multi}
# KVM passes the host's CPU through; TCG emulates the most it can.
cpu=max
[[ $accel == kvm* ]] && cpu=host
timeout "$GUEST_TIMEOUT" qemu-system-x86_64 -accel "$accel" -cpu "$cpu" \
    -smp 2 -m 2G -nographic -no-reboot -kernel "$KERNEL" -initrd "$CACHE/repeat.cpio.gz" \
    -append "console=ttyS0 quiet panic=-1 gr_runs=$RUNS gr_hang=$HANG gr_filter=$FILTER" \
    </dev/null 2>&1 | strip_terminal >"$LOG" || true
grep -a '^GR-\|^  ' "$LOG" || true
echo "guest-repeat: $((SECONDS - start)) s"
grep -aq "^GR-DONE $RUNS runs, 0 hung, 0 failed" "$LOG"
