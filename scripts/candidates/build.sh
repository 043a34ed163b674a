#!/usr/bin/env bash
# Builds each candidate of scripts/candidates/ (README.md there says what each one asks) as
# the current commit with that patch applied, and exports the examples that
# scripts/device-ab.sh runs into OUT/NAME (default OUT: devbench/candidates), each with a COMMIT
# file naming the commit and the patch. The builds share one target directory
# (target/candidates), so only futexkit and the examples build again for each.
#
#   scripts/candidates/build.sh [OUT]
#
# A patch that no longer applies is reported and skipped; the others are still built.
set -euo pipefail
cd "$(dirname "$0")/../.."

out=$(mkdir -p "${1:-devbench/candidates}" && cd "${1:-devbench/candidates}" && pwd)
repo=$PWD
base=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- src support examples || base="$base (with uncommitted changes, left out)"
source "$repo/scripts/scratch-worktrees.sh"

shopt -s nullglob
failed=0
built=()
for patch in scripts/candidates/*.patch; do
    name=$(basename "$patch" .patch)
    tree=$trees/$name
    git worktree add --quiet --detach "$tree" HEAD
    if ! git -C "$tree" apply --3way "$repo/$patch"; then
        echo "$name: the patch does not apply to $base; skipped" >&2
        failed=$((failed + 1))
        continue
    fi
    (cd "$tree" && CARGO_TARGET_DIR="$repo/target/candidates" scripts/benchmarks.sh \
        --export "$out/$name" --only rwlock,contention,condvar,hackbench,kvcompare)
    echo "$base + $name" >"$out/$name/COMMIT"
    built+=("$name")
done
echo "built into $out: ${built[*]:-nothing (no patch waits in scripts/candidates/)}" >&2
exit "$failed"
