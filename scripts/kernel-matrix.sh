#!/usr/bin/env bash
# Kernel matrix: runs futexkit's test binaries and the probe example on real Debian kernels
# booted under qemu, and natively on the host kernel, so every fallback meets a kernel that
# really lacks the feature (FUTEXKIT_DISABLE only pretends).
#
# Usage: scripts/kernel-matrix.sh [TARGET...]
#   TARGET: host, or a Debian suite whose linux-image-amd64 is booted. Default: all of
#   host bullseye bookworm bookworm-backports (Linux 6.18-ish host, 5.10, 6.1, 6.12); sid
#   (Linux 7.x, a moving target, so not in CI) only when named. `patched` boots futexkit's test
#   kernel (scripts/kernel/build.sh builds it, about 10 minutes the first time, so not in CI):
#   FUTEX_SWAP, FUTEX2_SPIN (opted in) and the rseq slice extension present, and every kernel
#   path's test must report that it ran (KM-KERNEL-PATH lines).
# Environment:
#   KM_ACCEL    auto (default: KVM when it boots a kernel, else TCG), kvm or tcg
#   KM_CACHE    downloads, initramfs and logs (default target/kernel-matrix)
#   KM_TIMEOUT  seconds one guest may run before it counts as hung (default 900, several times
#               the TCG runs that docs/design.md's CI section times)
#   KM_MIRROR   Debian mirror (default http://deb.debian.org/debian)
#
# Needs root for apt-get install (qemu-system-x86, cpio) unless both are there. Kernels and
# busybox are fetched with apt-get download and unpacked into KM_CACHE: the host's kernel,
# packages and apt sources stay as they were. Exits non-zero if any test fails, a probe
# disagrees with what the kernel is known to have, or a kernel cannot be booted.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/guest-common.sh
source scripts/guest-common.sh

CACHE=${KM_CACHE:-$PWD/target/kernel-matrix}
ACCEL=${KM_ACCEL:-auto}
GUEST_TIMEOUT=${KM_TIMEOUT:-900}
MIRROR=${KM_MIRROR:-http://deb.debian.org/debian}
DEFAULT_TARGETS=(host bullseye bookworm bookworm-backports)
# Suites apt must know about: every default one, whatever subset is run.
APT_SUITES=(bookworm bullseye bookworm-backports)

step() { printf '\n=== %s (%ss elapsed)\n' "$*" "$SECONDS"; }
note() { printf '    %s\n' "$*"; }
die() {
    printf 'kernel-matrix: %s\n' "$*" >&2
    exit 1
}

# What each kernel series is known to have, in Capabilities' Display words. These are facts
# about mainline versions (futex2 wait/wake/requeue 6.7, waitv 5.16, LOCK_PI2 5.14, NUMA and
# MPOL 6.16, rseq slices 7.0; SWAP and SPIN never merged), not copied from a run: the probe
# test compares what it detects against them.
expected_caps() {
    case $1 in
    5.10) echo "-futex2 -waitv -numa -mpol +pi -lock_pi2 +requeue_pi -swap -spin -rseq_slice" ;;
    6.1) echo "-futex2 +waitv -numa -mpol +pi +lock_pi2 +requeue_pi -swap -spin -rseq_slice" ;;
    6.12) echo "+futex2 +waitv -numa -mpol +pi +lock_pi2 +requeue_pi -swap -spin -rseq_slice" ;;
    # rseq slices depend on CONFIG_RSEQ_SLICE_EXTENSION: Debian's 7.2 leaves it out (ENOTSUPP).
    7.*) echo "+futex2 +waitv +numa +mpol +pi +lock_pi2 +requeue_pi -swap -spin" ;;
    *) echo "" ;;
    esac
}

# What futexkit's test kernel has (scripts/kernel/futex-swap-spin.patch on 7.2): op 13 is
# FUTEX_SWAP instead of LOCK_PI2; SPIN sits at 0x10 beside MPOL.
PATCHED_CAPS="+futex2 +waitv +numa +mpol +pi -lock_pi2 +requeue_pi +swap +spin +rseq_slice"
# The KM-KERNEL-PATH names tests/kernel_paths.rs reports, per capability.
kernel_paths_for() {
    case $1 in
    swap) echo "swap swap-handoff flipcall-swap" ;;
    spin) echo "spin" ;;
    rseq_slice) echo "rseq-slice" ;;
    *) echo "" ;;
    esac
}

# The fallback each absent capability sends futexkit down (README "Supported kernels").
fallback_for() {
    case $1 in
    futex2) echo "futex2::wait/wake/requeue -> Unsupported" ;;
    waitv) echo "futex2::waitv -> Unsupported" ;;
    numa) echo "NumaFutex -> Unsupported" ;;
    lock_pi2) echo "lock_pi2 -> Unsupported (lock_pi)" ;;
    swap) echo "swap emulated (wake+spin+wait)" ;;
    spin) echo "FUTEX2_SPIN -> user-space spin" ;;
    pi) echo "PI calls -> Unsupported" ;;
    *) echo "" ;;
    esac
}

install_tools() {
    local missing=()
    command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
    command -v cpio >/dev/null || missing+=(cpio)
    if ((${#missing[@]})); then
        # A fresh machine's package lists may be empty or stale: update them first.
        note "apt-get update; apt-get install ${missing[*]}"
        {
            apt-get update -q &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                    "${missing[@]}"
        } >"$CACHE/apt-install.log" 2>&1 ||
            die "apt-get install ${missing[*]} failed (see $CACHE/apt-install.log)"
    fi
    note "$(qemu-system-x86_64 --version | head -n1)"
}

# A private apt state (sources, lists, package cache) under CACHE, so adding backports and
# bullseye never touches /etc/apt or the host's package lists.
APT_OPTS=()
apt_setup() {
    local dir=$CACHE/apt suite
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/sources.list.d"
    : >"$dir/sources.list"
    for suite in "${APT_SUITES[@]}"; do
        echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $suite main" \
            >>"$dir/sources.list"
    done
    APT_OPTS=(-o "Dir::Etc::SourceList=$dir/sources.list"
        -o "Dir::Etc::SourceParts=$dir/sources.list.d"
        -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
        -o "APT::Sandbox::User=root" -q)
    note "apt-get update (${APT_SUITES[*]}) into $dir"
    apt-get "${APT_OPTS[@]}" update >"$dir/update.log" 2>&1 ||
        die "apt-get update failed (see $dir/update.log)"
}

# Downloads PACKAGE (optionally PACKAGE/SUITE) into DIR once; prints the .deb's path.
fetch_deb() {
    local pkg=$1 dir=$2 name=${1%%/*}
    mkdir -p "$dir"
    if ! compgen -G "$dir/${name}_*.deb" >/dev/null; then
        (cd "$dir" && apt-get "${APT_OPTS[@]}" download "$pkg" >/dev/null 2>"$dir/$name.err") ||
            return 1
    fi
    compgen -G "$dir/${name}_*.deb" | head -n1
}

# The image package the suite's linux-image-amd64 metapackage points at.
image_package() {
    apt-cache "${APT_OPTS[@]}" show "linux-image-amd64/$1" 2>/dev/null |
        sed -n 's/^Depends: //p' | grep -o 'linux-image-[^ ,]*' | head -n1
}

# Unpacks only the vmlinuz of the suite's current kernel, as boot/vmlinuz-VERSION; prints its
# path. Up to 6.x Debian ships /boot/vmlinuz-VERSION in linux-image-VERSION; from 7.x (sid)
# /usr/lib/modules/VERSION/vmlinuz in linux-binary-VERSION, which linux-image-VERSION needs.
fetch_kernel() {
    local suite=$1 pkg deb dir found
    pkg=$(image_package "$suite")
    [[ -n $pkg ]] || return 1
    dir=$CACHE/kernels/$pkg
    if ! compgen -G "$dir/boot/vmlinuz-*" >/dev/null; then
        mkdir -p "$dir/boot"
        deb=$(fetch_deb "$pkg/$suite" "$CACHE/debs") || return 1
        if ! dpkg-deb --fsys-tarfile "$deb" |
            tar -x -C "$dir" --wildcards './boot/vmlinuz-*' 2>/dev/null; then
            deb=$(fetch_deb "${pkg/linux-image-/linux-binary-}/$suite" "$CACHE/debs") || return 1
            dpkg-deb --fsys-tarfile "$deb" |
                tar -x -C "$dir" --wildcards './usr/lib/modules/*/vmlinuz' || return 1
            found=$(compgen -G "$dir/usr/lib/modules/*/vmlinuz" | head -n1)
            mv "$found" "$dir/boot/vmlinuz-$(basename "$(dirname "$found")")"
        fi
    fi
    compgen -G "$dir/boot/vmlinuz-*" | head -n1
}

# Static busybox for init's shell and mounts, from the host's suite (bookworm).
fetch_busybox() {
    local deb dir=$CACHE/busybox
    if [[ ! -x $dir/busybox ]]; then
        deb=$(fetch_deb busybox-static/bookworm "$CACHE/debs") || die "cannot fetch busybox-static"
        mkdir -p "$dir/x"
        dpkg-deb -x "$deb" "$dir/x"
        cp "$(find "$dir/x" -path "*bin/busybox" -type f | head -n1)" "$dir/busybox"
    fi
    echo "$dir/busybox"
}

TEST_BINS=()
PROBE_BIN=
# One cargo build gives the test harnesses (target/*/deps) and the probe example. The loom
# suites are left out: without --cfg futexkit_loom they compile to nothing. shared_kill comes
# from a second, optimized build (the bench profile, whose dependencies `cargo bench` builds):
# it kills a single-stepped child after every instruction of a lock and an unlock, which is
# the longest part of a TCG guest's run in the debug build, and the optimized one has fewer
# instructions to step, each of them still killed at. `cargo test` runs the debug one.
build_binaries() {
    local json=$CACHE/build.json optimized=$CACHE/build-optimized.json exe kill_bin
    cargo test --no-run --message-format=json >"$json"
    cargo test --profile bench --test shared_kill --no-run --message-format=json >"$optimized"
    kill_bin=$(grep -o '"executable":"[^"]*"' "$optimized" | cut -d'"' -f4 | head -n1)
    [[ -x $kill_bin ]] || die "cargo test --profile bench built no shared_kill"
    TEST_BINS+=("$kill_bin")
    while read -r exe; do
        case $exe in
        */examples/probe) PROBE_BIN=$exe ;;
        */examples/*) ;;
        */deps/loom_*) ;;
        */deps/shared_kill-*) ;;
        */deps/*) TEST_BINS+=("$exe") ;;
        esac
    done < <(grep -o '"executable":"[^"]*"' "$json" | cut -d'"' -f4 | sort -u)
    [[ -n $PROBE_BIN ]] || die "cargo test --no-run built no probe example"
    ((${#TEST_BINS[@]})) || die "cargo test --no-run built no test binary"
    note "probe example and ${#TEST_BINS[@]} test binaries: $(for b in "${TEST_BINS[@]}"; do
        printf '%s ' "$(test_name "$b")"
    done)"
}

# deps/condvar-6d26b1047cc019b6 -> condvar
test_name() {
    local base=${1##*/}
    echo "${base%-*}"
}

# PID 1 of the guest: the shared prelude (guest-common.sh), then the probe and every test
# binary with a sentinel line around each, then power off.
write_init() {
    {
        guest_init_prelude
        cat <<'EOF'
# The host passes what this kernel is known to have as km_expect=+a,-b on the command line.
for arg in $(cat /proc/cmdline); do
    case $arg in
    km_expect=*) export FUTEXKIT_TEST_EXPECT_CAPS="${arg#km_expect=}" ;;
    km_enable=*) export FUTEXKIT_ENABLE="${arg#km_enable=}" ;;
    esac
done
# A guest runs on an emulated CPU: tests/swap.rs's hand-off tests and tests/flipcall.rs's
# round trips take 50,000 turns each, not a million and 200,000 (the host run keeps those).
export FUTEXKIT_TEST_HAND_OFFS=50000
echo "KM-BOOTED $(uname -r) cpus $(nproc)"
echo "KM-EXPECT ${FUTEXKIT_TEST_EXPECT_CAPS:-none}"
echo "KM-PROBE-BEGIN"
/km/probe
echo "KM-PROBE-END rc=$?"
for t in /km/tests/*; do
    echo "KM-TEST-BEGIN ${t##*/}"
    "$t" --test-threads=2
    echo "KM-TEST-END ${t##*/} rc=$?"
done
echo "KM-ALL-DONE"
poweroff -f
EOF
    } >"$1"
    chmod +x "$1"
}

build_initramfs() {
    local root=$CACHE/rootfs bin
    rm -rf "$root"
    mkdir -p "$root"/{bin,proc,sys,dev,tmp,km/tests}
    cp "$(fetch_busybox)" "$root/bin/busybox"
    write_init "$root/init"
    copy_with_libs "$PROBE_BIN" "$root" /km/probe
    for bin in "${TEST_BINS[@]}"; do
        copy_with_libs "$bin" "$root" "/km/tests/$(test_name "$bin")"
    done
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$CACHE/initramfs.cpio.gz"
    note "$CACHE/initramfs.cpio.gz: $(du -h "$CACHE/initramfs.cpio.gz" | cut -f1)"
}

QEMU_ACCEL=()
# KVM only if /dev/kvm opens read-write and really boots a stock kernel: PVM's /dev/kvm (a
# software hypervisor for nested guests, module kvm_pvm) opens fine but is built for PVM-aware
# guests; a stock 6.1 was still in its decompressor after 120 s, where TCG reaches init in 4 s.
choose_accel() {
    local kernel=$1 why=
    if [[ $ACCEL == tcg ]]; then
        why="KM_ACCEL=tcg"
    elif [[ ! -c /dev/kvm ]]; then
        why="no /dev/kvm"
    elif ! (: <>/dev/kvm) 2>/dev/null; then
        why="/dev/kvm does not open read-write"
    elif [[ -d /sys/module/kvm_pvm && $ACCEL != kvm ]]; then
        why="/dev/kvm is PVM (kvm_pvm), which cannot run stock kernels at speed"
    elif ! smoke_boot "$kernel"; then
        why="a KVM smoke boot did not reach init in 60 s"
    fi
    if [[ -z $why ]]; then
        QEMU_ACCEL=(-accel kvm -cpu host)
        note "accelerator: KVM"
    else
        [[ $ACCEL != kvm ]] || die "KM_ACCEL=kvm but $why"
        QEMU_ACCEL=(-accel "tcg,thread=multi" -cpu max)
        note "accelerator: TCG (software emulation): $why"
    fi
}

# Boots KERNEL under KVM with an init that only says hello.
smoke_boot() {
    local root=$CACHE/smoke
    rm -rf "$root"
    mkdir -p "$root/bin" "$root/proc"
    cp "$(fetch_busybox)" "$root/bin/busybox"
    printf '#!/bin/busybox sh\n/bin/busybox echo KM-SMOKE-OK\n/bin/busybox poweroff -f\n' \
        >"$root/init"
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$CACHE/smoke.cpio.gz"
    timeout 60 qemu-system-x86_64 -accel kvm -cpu host -smp 2 -m 256M -nographic \
        -no-reboot -kernel "$1" -initrd "$CACHE/smoke.cpio.gz" \
        -append "console=ttyS0 quiet panic=-1" </dev/null >"$CACHE/smoke.log" 2>&1 || true
    strip_terminal <"$CACHE/smoke.log" | grep -c '^KM-SMOKE-OK' >/dev/null
}

# Boots KERNEL with the test initramfs; the serial console goes to LOG. ENABLE is passed on as
# FUTEXKIT_ENABLE.
boot() {
    local kernel=$1 log=$2 expect=$3 enable=${4:-}
    # tsc=reliable: under TCG the clocksource watchdog finds the TSC unstable some 45 s into a
    # run and patches the kernel's sched_clock branches while other vCPUs run through them,
    # which oopses on 6.12 (int3 in sched_clock_cpu, from clocksource_watchdog_work); the guest's
    # TSC is QEMU's virtual clock, monotonic, which is all the tests need of it.
    local append="console=ttyS0 quiet panic=-1 tsc=reliable"
    [[ -z $expect ]] || append+=" km_expect=${expect// /,}"
    [[ -z $enable ]] || append+=" km_enable=$enable"
    # 2G: the initramfs of debug test binaries unpacks beside its compressed copy and the
    # kernel, and with too little memory the kernel fails to unpack it ("write error").
    timeout "$GUEST_TIMEOUT" qemu-system-x86_64 "${QEMU_ACCEL[@]}" -smp 2 -m 2G -nographic \
        -no-reboot -kernel "$kernel" -initrd "$CACHE/initramfs.cpio.gz" -append "$append" \
        </dev/null 2>&1 | strip_terminal >"$log" || true
}

# The same run on the host kernel, with the same sentinel lines.
run_host() {
    local log=$1 bin name rc
    {
        echo "KM-BOOTED $(uname -r) cpus $(nproc)"
        echo "KM-PROBE-BEGIN"
        rc=0
        "$PROBE_BIN" || rc=$?
        echo "KM-PROBE-END rc=$rc"
        for bin in "${TEST_BINS[@]}"; do
            name=$(test_name "$bin")
            echo "KM-TEST-BEGIN $name"
            rc=0
            "$bin" --test-threads=2 2>&1 || rc=$?
            echo "KM-TEST-END $name rc=$rc"
        done
        echo "KM-ALL-DONE"
    } >"$log" 2>&1
}

RESULTS=()
FAILED=0
# Reads LOG: prints the probe table and each binary's result; records one RESULTS row.
report() {
    local target=$1 log=$2 secs=$3 accel=$4 expect=$5
    local release probe_line passed=0 failed=0 problems=() name rc summary fallbacks verdict
    # The firmware's last line has no newline, so the guest's first line may follow it.
    release=$(sed -n 's/.*KM-BOOTED \([^ ]*\).*/\1/p' "$log" | head -n1)
    if [[ -z $release ]]; then
        problems+=("did not boot to init")
    fi
    sed -n '/^KM-PROBE-BEGIN/,/^KM-PROBE-END/p' "$log" | { grep -v '^KM-' || true; } |
        sed 's/^/    /'
    grep -q '^KM-PROBE-END rc=0' "$log" || problems+=("probe example failed")
    while read -r name; do
        rc=$(sed -n "s/^KM-TEST-END $name rc=//p" "$log")
        # A harness that re-runs itself (probe.rs) prints two result lines: the last is its own.
        summary=$(sed -n "/^KM-TEST-BEGIN $name\$/,/^KM-TEST-END $name /p" "$log" |
            grep '^test result:' | tail -n1)
        printf '    %-10s rc=%-3s %s\n' "$name" "${rc:-?}" "${summary:-no result line}"
        passed=$((passed + $(sed -n 's/.* \([0-9]*\) passed;.*/\1/p' <<<"$summary" | grep . || echo 0)))
        failed=$((failed + $(sed -n 's/.* \([0-9]*\) failed;.*/\1/p' <<<"$summary" | grep . || echo 0)))
        [[ $rc == 0 ]] || problems+=("$name exited ${rc:-without a sentinel (hung or crashed)}")
    done < <(sed -n 's/^KM-TEST-BEGIN //p' "$log")
    grep -q '^KM-ALL-DONE' "$log" || problems+=("did not finish (timeout ${GUEST_TIMEOUT}s or crash)")
    # Kernel paths (tests/kernel_paths.rs): each one an expected capability needs must have run.
    local word path count paths=()
    grep -o 'KM-KERNEL-PATH .*' "$log" | sed 's/^KM-KERNEL-PATH /    ran: /' || true
    for word in $expect; do
        [[ $word == +* ]] || continue
        for path in $(kernel_paths_for "${word#+}"); do
            count=$(grep -c "KM-KERNEL-PATH $path:" "$log" || true)
            paths+=("$path $count")
            ((count > 0)) || problems+=("kernel path $path never ran")
        done
    done
    if [[ -n $expect ]]; then
        # tests/probe.rs compares; this only makes sure the guest was told.
        note "expected: $expect (checked by tests/probe.rs)"
        grep -qx "KM-EXPECT ${expect// /,}" "$log" || problems+=("the guest never saw km_expect")
    fi
    if ((${#problems[@]})); then
        FAILED=1
        grep -E '^(---- |thread .* panicked|failures:|test .* FAILED)' "$log" | head -n 40 |
            sed 's/^/    | /' || true
        note "FAILED on $target: $(IFS=';'; echo "${problems[*]}") (log: $log)"
    fi
    probe_line=$(probe_summary "$log")
    fallbacks=$(fallbacks_of "$probe_line")
    verdict="$passed passed, $failed failed"
    ((${#paths[@]} == 0)) || verdict+="; kernel paths run: $(IFS=,; echo "${paths[*]}" | sed 's/,/, /g')"
    ((${#problems[@]} == 0)) || verdict+=" (FAILED)"
    RESULTS+=("$target|${release:-?}|$accel|${secs}s|$probe_line|${fallbacks:--}|$verdict")
    TOTAL_PASSED=$((TOTAL_PASSED + passed))
    TOTAL_FAILED=$((TOTAL_FAILED + failed))
}
TOTAL_PASSED=0
TOTAL_FAILED=0

# "a; b" for the absent ("-name") capabilities that have a fallback.
fallbacks_of() {
    local word out=()
    for word in $1; do
        [[ $word == -* ]] || continue
        word=$(fallback_for "${word#-}")
        [[ -z $word ]] || out+=("$word")
    done
    ((${#out[@]})) || return 0
    printf '%s' "${out[0]}"
    for word in "${out[@]:1}"; do printf '; %s' "$word"; done
}

# "+futex2 -waitv ..." from the probe table's yes/no/disabled column.
probe_summary() {
    sed -n '/^KM-PROBE-BEGIN/,/^KM-PROBE-END/p' "$1" |
        awk '$2 == "yes" { printf "+%s ", $1 } $2 == "no" { printf "-%s ", $1 }
             $2 == "disabled" { printf "!%s ", $1 }' | sed 's/ $//'
}

# Whether the guest in LOG hit the oops a stock kernel can hit under TCG: an int3 trap in
# sched_clock_cpu while the kernel patches its sched_clock branches (in early boot, or later
# where the clocksource watchdog still runs), a breakpoint in the kernel's own text that no
# user-space code puts there. Any other oops or panic fails the target.
clock_int3_oops() {
    grep -q 'Oops: int3' "$1" && grep -q 'RIP: 0010:sched_clock_cpu' "$1"
}

run_target() {
    local target=$1 kernel log start series expect enable=
    log=$CACHE/logs/$target.log
    mkdir -p "$CACHE/logs"
    start=$SECONDS
    if [[ $target == host ]]; then
        step "host kernel $(uname -r): tests run natively"
        run_host "$log"
        report host "$log" $((SECONDS - start)) native ""
        return
    fi
    if [[ $target == patched ]]; then
        step "patched: build (or reuse) futexkit's test kernel with scripts/kernel/build.sh"
        if ! kernel=$(scripts/kernel/build.sh | tail -n1) || [[ ! -f $kernel ]]; then
            FAILED=1
            note "scripts/kernel/build.sh failed"
            RESULTS+=("patched|?|-|-|not booted: the test kernel did not build|-|-")
            return
        fi
        expect=$PATCHED_CAPS
        enable=spin
    else
        step "$target: fetch linux-image-amd64's kernel"
        if ! kernel=$(fetch_kernel "$target"); then
            FAILED=1
            note "could not fetch a kernel for $target (see $CACHE/debs/*.err)"
            RESULTS+=("$target|?|-|-|not booted: no linux-image-amd64 in $target|-|-")
            return
        fi
        series=$(basename "$kernel" | sed -n 's/^vmlinuz-\([0-9]*\.[0-9]*\).*/\1/p')
        expect=$(expected_caps "$series")
    fi
    note "$kernel"
    ((${#QEMU_ACCEL[@]})) || choose_accel "$kernel"
    step "$target: boot $(basename "$kernel") (${QEMU_ACCEL[*]:0:2}, -smp 2, timeout ${GUEST_TIMEOUT}s)"
    start=$SECONDS
    boot "$kernel" "$log" "$expect" "$enable"
    if ! grep -q 'KM-BOOTED' "$log" || clock_int3_oops "$log"; then
        note "the guest did not reach init or oopsed in the kernel's own clock code: $(grep -m1 -E 'Kernel panic|Oops' "$log" || echo 'no panic line'); booting again (first log: $log.first)"
        cp "$log" "$log.first"
        boot "$kernel" "$log" "$expect" "$enable"
    fi
    report "$target" "$log" $((SECONDS - start)) "${QEMU_ACCEL[1]%%,*}" "$expect"
}

print_table() {
    local row
    step "summary"
    echo "| target | kernel | accel | time | detected | fallbacks that ran | tests |"
    echo "|---|---|---|---|---|---|---|"
    for row in "${RESULTS[@]}"; do
        echo "| ${row//|/ | } |"
    done
}

main() {
    local targets=("$@") target needs_guest=0
    ((${#targets[@]})) || targets=("${DEFAULT_TARGETS[@]}")
    for target in "${targets[@]}"; do
        [[ $target == host ]] && continue
        needs_guest=1
        [[ $target == patched ]] && continue
        # A suite beyond the defaults (sid: Linux 7.x) joins the apt lists only when asked for.
        [[ " ${APT_SUITES[*]} " == *" $target "* ]] || APT_SUITES+=("$target")
    done
    mkdir -p "$CACHE"
    step "build test binaries and the probe example"
    build_binaries
    if ((needs_guest)); then
        step "install qemu and cpio where missing"
        install_tools
        step "apt lists for the kernels' suites"
        apt_setup
        step "initramfs: busybox init, probe, test binaries and their shared libraries"
        build_initramfs
    fi
    for target in "${targets[@]}"; do
        run_target "$target"
    done
    print_table
    # The closing line CI reads.
    echo "kernel-matrix: $TOTAL_PASSED passed, $TOTAL_FAILED failed"
    ((FAILED == 0)) || die "at least one kernel failed (logs in $CACHE/logs)"
}

main "$@"
