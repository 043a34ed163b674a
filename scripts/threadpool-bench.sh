#!/usr/bin/env bash
# threadpool 1.8.1, as published and with only its Mutex/Condvar import switched to futexkit:
# round trips per second of `pool.execute(|| {}); pool.join();` with 1, 2 and 4 workers, in
# interleaved rounds, and the CPU time each round trip costs.
#
#   scripts/threadpool-bench.sh [--rounds N] [--ms MS] [--against DIR]
#
# --against DIR adds a third column: threadpool switched to the futexkit checkout in DIR (an
# earlier build, say `git worktree add /tmp/old <rev>`). The crate's source comes from the cargo
# registry (fetched on first use) and is copied and patched under target/threadpool-bench; none
# of it is part of this repository.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

rounds=5
ms=300
against=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --ms) ms="$2"; shift 2 ;;
        --against) against="$(cd "$2" && pwd)"; shift 2 ;;
        *) echo "usage: $0 [--rounds N] [--ms MS] [--against DIR]" >&2; exit 2 ;;
    esac
done
case "$rounds$ms" in *[!0-9]*) echo "--rounds and --ms take whole numbers" >&2; exit 2 ;; esac

work="$repo/target/threadpool-bench"
mkdir -p "$work"

# Fetch the published crate through cargo, then find its unpacked source.
mkdir -p "$work/fetch/src"
cat > "$work/fetch/Cargo.toml" <<'EOF'
[package]
name = "fetch"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
threadpool = "=1.8.1"
[workspace]
EOF
echo 'fn main() {}' > "$work/fetch/src/main.rs"
(cd "$work/fetch" && cargo fetch --quiet)
src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/threadpool-1.8.1 | head -n 1)
[ -f "$src/src/lib.rs" ] || { echo "threadpool 1.8.1 source not found after cargo fetch" >&2; exit 1; }

# copy_pool NAME [FUTEXKIT_DIR [FUTEXKIT_PACKAGE]]: a copy of the crate as package NAME; with a
# futexkit checkout, its `std::sync::{Arc, Condvar, Mutex}` import becomes futexkit's.
copy_pool() {
    local name="$1" fk="${2:-}" fk_package="${3:-futexkit}"
    rm -rf "$work/$name"
    mkdir -p "$work/$name/src"
    cp "$src/src/lib.rs" "$work/$name/src/lib.rs"
    cat > "$work/$name/Cargo.toml" <<EOF
[package]
name = "$name"
version = "1.8.1"
edition = "2015"
publish = false
[lib]
doctest = false
[dependencies]
num_cpus = "1.13"
EOF
    if [ -n "$fk" ]; then
        echo "futexkit = { package = \"$fk_package\", path = \"$fk\" }" >> "$work/$name/Cargo.toml"
        grep -q '^use std::sync::{Arc, Condvar, Mutex};$' "$work/$name/src/lib.rs" ||
            { echo "threadpool's import line changed; update this script" >&2; exit 1; }
        sed -i 's/^use std::sync::{Arc, Condvar, Mutex};$/use std::sync::Arc;\nuse futexkit::{Condvar, Mutex};/' \
            "$work/$name/src/lib.rs"
        sed -i 's/^extern crate num_cpus;$/extern crate futexkit;\nextern crate num_cpus;/' \
            "$work/$name/src/lib.rs"
    fi
}
copy_pool tp_std
copy_pool tp_futexkit "$repo"
variants="std futexkit"
if [ -n "$against" ]; then
    # Cargo takes one package per name: copy that checkout's library as `futexkit-against`
    # (its crate is still `futexkit`), without its tests, benches and dev-dependencies.
    rm -rf "$work/fk_against"
    mkdir -p "$work/fk_against"
    cp -r "$against/src" "$against/build.rs" "$work/fk_against/"
    python3 - "$against/Cargo.toml" "$work/fk_against/Cargo.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
out, keep = [], True
for line in text.splitlines():
    header = re.match(r"^\[\[?([^\]]+)\]\]?\s*$", line)
    if header:
        name = header.group(1)
        keep = not (name in ("bench", "test", "example", "dev-dependencies", "workspace")
                    or name.startswith("profile"))
    if keep:
        out.append(line)
text = "\n".join(out) + "\n"
text = re.sub(r'^name = "futexkit"$', 'name = "futexkit-against"', text, count=1, flags=re.M)
text += '\n[lib]\nname = "futexkit"\n'
open(sys.argv[2], "w").write(text)
PY
    copy_pool tp_against "$work/fk_against" futexkit-against
    variants="$variants against"
fi

mkdir -p "$work/bench/src"
{
    cat <<'EOF'
[package]
name = "threadpool-bench"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
libc = "0.2"
tp_std = { path = "../tp_std" }
tp_futexkit = { path = "../tp_futexkit" }
EOF
    [ -n "$against" ] && echo 'tp_against = { path = "../tp_against" }'
    echo '[workspace]'
} > "$work/bench/Cargo.toml"

cat > "$work/bench/src/main.rs" <<'EOF'
use std::time::{Duration, Instant};

/// CPU time of the whole process so far (user + system).
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

macro_rules! round {
    ($krate:ident, $workers:expr, $ms:expr) => {{
        let pool = $krate::ThreadPool::new($workers);
        for _ in 0..100 {
            pool.execute(|| {});
            pool.join();
        }
        let (start, cpu) = (Instant::now(), cpu_time());
        let mut n = 0u64;
        while start.elapsed() < Duration::from_millis($ms) {
            pool.execute(|| {});
            pool.join();
            n += 1;
        }
        let (wall, cpu) = (start.elapsed(), cpu_time() - cpu);
        drop(pool);
        (n as f64 / wall.as_secs_f64(), cpu.as_secs_f64() * 1e6 / n as f64)
    }};
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args[1].parse().unwrap();
    let ms: u64 = args[2].parse().unwrap();
    let names: Vec<&str> = args[3].split(' ').collect();
    println!("| workers | round | {} | futexkit / std |", names.iter().map(|n| format!("{n} round trips/s (CPU us each)")).collect::<Vec<_>>().join(" | "));
    println!("|---|---|{}---|", "---|".repeat(names.len()));
    for workers in [1usize, 2, 4] {
        let mut ratios = Vec::new();
        for round in 0..rounds {
            let mut results = vec![(0.0, 0.0); names.len()];
            // Alternate the order so that neither side always runs first.
            let order: Vec<usize> = if round % 2 == 0 {
                (0..names.len()).collect()
            } else {
                (0..names.len()).rev().collect()
            };
            for i in order {
                results[i] = match names[i] {
                    "std" => round!(tp_std, workers, ms),
                    "futexkit" => round!(tp_futexkit, workers, ms),
                    _ => run_against(workers, ms),
                };
            }
            let ratio = results[1].0 / results[0].0;
            ratios.push(ratio);
            println!(
                "| {workers} | {} | {} | {ratio:.2} |",
                round + 1,
                results.iter().map(|(r, c)| format!("{r:.0} ({c:.1})")).collect::<Vec<_>>().join(" | ")
            );
        }
        ratios.sort_by(|a, b| a.total_cmp(b));
        eprintln!("workers {workers}: futexkit / std median {:.2}, lowest {:.2}", ratios[ratios.len() / 2], ratios[0]);
    }
}
EOF
if [ -n "$against" ]; then
    cat >> "$work/bench/src/main.rs" <<'EOF'
fn run_against(workers: usize, ms: u64) -> (f64, f64) {
    round!(tp_against, workers, ms)
}
EOF
else
    cat >> "$work/bench/src/main.rs" <<'EOF'
fn run_against(_: usize, _: u64) -> (f64, f64) {
    unreachable!()
}
EOF
fi

(cd "$work/bench" && cargo build --release --quiet --target-dir "$work/target")
"$work/target/release/threadpool-bench" "$rounds" "$ms" "$variants"
