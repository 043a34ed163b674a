#!/usr/bin/env bash
# futexkit as a dependent and crates.io see it (CI runs this on a clean clone):
#  1. a fresh crate whose only dependency is futexkit gets no model checker in its lock file;
#  2. that crate builds on the `rust-version` toolchain with the default features and with every
#     feature that claims it (all but lock_api_05, which needs Rust 1.95, and the model checkers,
#     which serve tests); rustup installs the toolchain (where it cannot, CI's clippy
#     `incompatible_msrv` lint is the check);
#  3. every file the README links is in the package;
#  4. `cargo publish --dry-run` passes (it packages and builds the crate as uploaded).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
new_dependent() { # name, features (a TOML array)
    mkdir -p "$work/$1/src"
    cat >"$work/$1/Cargo.toml" <<TOML
[package]
name = "$1"
version = "0.0.0"
edition = "2021"
rust-version = "$msrv"

[dependencies]
futexkit = { path = "$root", features = $2 }
TOML
    cat >"$work/$1/src/main.rs" <<'RUST'
fn main() {
    let counter = futexkit::Mutex::new(0);
    *counter.lock().unwrap() += 1;
    assert_eq!(*counter.lock().unwrap(), 1);
}
RUST
    # The lock file a dependent on the oldest supported toolchain gets (cargo's MSRV-aware
    # resolver: the newest versions whose rust-version it meets).
    (cd "$work/$1" && CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback \
        cargo generate-lockfile --quiet)
}

echo "--- a fresh dependent's lock file (default features)"
new_dependent plain '[]'
packages=$(grep -c '^name = ' "$work/plain/Cargo.lock")
echo "$packages packages: $(sed -n 's/^name = "\(.*\)"/\1/p' "$work/plain/Cargo.lock" | tr '\n' ' ')"
if grep -E '^name = "(loom|shuttle|generator|tracing|scoped-tls)"' "$work/plain/Cargo.lock"; then
    echo "error: a model checker (or its dependencies) is in a dependent's lock file" >&2
    exit 1
fi

echo "--- rust-version $msrv: the default features, and every feature but lock_api_05, on Rust $msrv"
new_dependent msrv '["lock_api", "serde", "bytemuck", "zerocopy", "profile", "deadlock"]'
if rustup toolchain install "$msrv" --profile minimal >/dev/null 2>&1; then
    for crate in plain msrv; do
        (cd "$work/$crate" && cargo "+$msrv" build --quiet && cargo "+$msrv" run --quiet)
    done
    echo "ok: built and ran on $(rustup run "$msrv" rustc --version)"
else
    echo "note: rustup cannot install Rust $msrv here; clippy's incompatible_msrv lint stands in"
fi

echo "--- files the README links, in the package"
listed=$(cargo package --list --allow-dirty --quiet 2>/dev/null)
missing=0
for link in $(grep -o '](\([^)#:]*\))' README.md | sed 's/^](\(.*\))$/\1/' | sort -u); do
    link=${link%/}
    if ! grep -qx -e "$link" -e "$link/.*" <<<"$listed"; then
        echo "error: README links $link, which the package leaves out" >&2
        missing=1
    fi
done
[ "$missing" = 0 ] && echo "ok: every linked file is packaged"
[ "$missing" = 0 ]

echo "--- cargo publish --dry-run"
# Tests, benches and examples other than probe.rs are left out of the package on purpose
# (Cargo.toml, `include`): cargo's note for each is dropped.
if ! out=$(cargo publish --dry-run 2>&1); then
    echo "$out" >&2
    exit 1
fi
grep -v "^warning: ignoring \(test\|benchmark\|example\) " <<<"$out"
