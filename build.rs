//! Declares futexkit's cfgs and refuses non-Linux targets with one clear error.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
    println!("cargo::rerun-if-changed=build.rs");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os != "linux" {
        eprintln!(
            "error: futexkit supports Linux only (target OS is `{target_os}`): it is built on the \
             Linux futex(2) system calls"
        );
        std::process::exit(1);
    }
}
