#!/usr/bin/env bash
# Builds futexkit's test kernel: a kernel with all three features no packaged kernel has, so the
# code paths futexkit takes only on such a kernel can run (scripts/kernel-matrix.sh patched).
#
#   - Debian sid's linux-source-7.2 (Linux 7.2 with Debian's patches), which has the rseq
#     time-slice extension; Debian builds it without CONFIG_RSEQ_SLICE_EXTENSION, this does not;
#   - futex-swap-spin.patch (beside this script): FUTEX_SWAP as op 13 and FUTEX2_SPIN as futex2
#     flag 0x10, each described at the patch's top;
#   - `make tinyconfig` plus futexkit.config (beside this script): enough to boot the kernel
#     matrix's busybox initramfs under qemu and run the tests; no modules.
#
# Prints the bzImage's path on its last line. A build whose source, patch and configuration are
# unchanged is reused (the first build takes about 10 minutes on 2 cores).
#
# Environment:
#   KB_CACHE   downloads and builds (default target/kernel-build)
#   KM_MIRROR  Debian mirror (default http://deb.debian.org/debian)
#   KB_JOBS    make -j (default: the number of CPUs)
#
# Needs gcc, make, flex, bison, bc and libelf-dev (apt-get installs the missing ones as root).
set -euo pipefail
cd "$(dirname "$0")/../.."

HERE=scripts/kernel
CACHE=${KB_CACHE:-$PWD/target/kernel-build}
MIRROR=${KM_MIRROR:-http://deb.debian.org/debian}
JOBS=${KB_JOBS:-$(nproc)}
SOURCE_PACKAGE=linux-source-7.2
PATCH=$HERE/futex-swap-spin.patch
FRAGMENT=$HERE/futexkit.config

say() { printf '    %s\n' "$*" >&2; }
die() {
    printf 'kernel/build.sh: %s\n' "$*" >&2
    exit 1
}

install_tools() {
    local missing=() tool
    for tool in gcc:gcc make:make flex:flex bison:bison bc:bc; do
        command -v "${tool%%:*}" >/dev/null || missing+=("${tool##*:}")
    done
    [[ -e /usr/include/libelf.h || -e /usr/include/elfutils/libelf.h ]] || missing+=(libelf-dev)
    ((${#missing[@]})) || return 0
    say "apt-get install ${missing[*]}"
    {
        apt-get update -q &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                "${missing[@]}"
    } >"$CACHE/apt-install.log" 2>&1 || die "apt-get install failed (see $CACHE/apt-install.log)"
}

# Downloads linux-source-7.2 from sid with a private apt state (the host's stays as it was);
# prints the path of its source tarball.
fetch_source() {
    local dir=$CACHE/apt deb tarball=$CACHE/src/$SOURCE_PACKAGE.tar.xz
    if [[ ! -f $tarball ]]; then
        mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/sources.list.d" \
            "$CACHE/src"
        echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR sid main" \
            >"$dir/sources.list"
        local opts=(-o "Dir::Etc::SourceList=$dir/sources.list"
            -o "Dir::Etc::SourceParts=$dir/sources.list.d"
            -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
            -o "APT::Sandbox::User=root" -q)
        say "apt-get download $SOURCE_PACKAGE (sid)"
        apt-get "${opts[@]}" update >"$dir/update.log" 2>&1 ||
            die "apt-get update failed (see $dir/update.log)"
        (cd "$CACHE/src" && apt-get "${opts[@]}" download "$SOURCE_PACKAGE" >/dev/null 2>&1) ||
            die "sid has no $SOURCE_PACKAGE any more: port $PATCH to the newer source"
        deb=$(compgen -G "$CACHE/src/${SOURCE_PACKAGE}_*.deb" | head -n1)
        dpkg-deb --fsys-tarfile "$deb" |
            tar -x -O "./usr/src/$SOURCE_PACKAGE.tar.xz" >"$tarball.part"
        mv "$tarball.part" "$tarball"
    fi
    echo "$tarball"
}

main() {
    mkdir -p "$CACHE"
    install_tools
    local tarball key tree image
    tarball=$(fetch_source)
    key=$(cat "$tarball" "$PATCH" "$FRAGMENT" | sha256sum | cut -c1-16)
    tree=$CACHE/build-$key
    image=$tree/arch/x86/boot/bzImage
    if [[ -f $image ]]; then
        say "reusing $image (source, patch and configuration unchanged)"
        echo "$image"
        return
    fi
    rm -rf "$CACHE"/build-*
    mkdir -p "$tree"
    say "unpack $(basename "$tarball")"
    tar -x -f "$tarball" -C "$tree" --strip-components=1
    say "apply $(basename "$PATCH")"
    patch -d "$tree" -p1 --quiet --forward <"$PATCH" || die "$PATCH does not apply"
    say "configure: tinyconfig + $(basename "$FRAGMENT")"
    # Later lines of a .config win: the fragment's override tinyconfig's, and olddefconfig
    # settles what they imply.
    {
        make -C "$tree" -s tinyconfig
        cat "$FRAGMENT" >>"$tree/.config"
        make -C "$tree" -s olddefconfig
    } >"$CACHE/config.log" 2>&1 || die "configuration failed (see $CACHE/config.log)"
    # Kconfig drops what it cannot satisfy without a word: every line asked for must be there.
    local line
    while read -r line; do
        [[ $line == CONFIG_* ]] || continue
        grep -qxF "$line" "$tree/.config" || die "$line did not survive configuration"
    done <"$FRAGMENT"
    say "make -j$JOBS bzImage (log: $CACHE/build.log)"
    make -C "$tree" -j"$JOBS" bzImage >"$CACHE/build.log" 2>&1 ||
        die "kernel build failed: $(grep -m3 -E 'error|Error' "$CACHE/build.log" || true)"
    echo "$image"
}

main "$@"
