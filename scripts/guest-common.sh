# Shared by scripts/kernel-matrix.sh and scripts/guest-repeat.sh (sourced from the repository
# root): what a busybox initramfs for futexkit's test binaries needs.

# The start of a guest's /init (PID 1): mounts what the tests touch (/proc for wchan,
# current_exe and the hang dumps, /sys, /dev, /dev/shm, /tmp), installs busybox's applets and
# brings up loopback (tests/kvserver.rs serves on it; it starts down in a bare initramfs).
guest_init_prelude() {
    cat <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
export PATH=/bin HOME=/tmp TMPDIR=/tmp RUST_BACKTRACE=1
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
cd /tmp
INIT
}

# Copies BINARY to ROOT/DEST and the shared libraries ldd names (dereferenced) under ROOT.
copy_with_libs() {
    local bin=$1 root=$2 dest=$3 lib
    install -D -m 755 "$bin" "$root$dest"
    for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
        [[ -e $root$lib ]] || cp -L --parents "$lib" "$root"
    done
}

# The console log without carriage returns and the firmware's terminal escapes.
strip_terminal() {
    tr -d '\r' | sed 's/\x1b[^A-Za-z]*[A-Za-z]//g'
}
