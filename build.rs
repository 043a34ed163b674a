//! Declares futexkit's cfgs and refuses non-Linux targets with one clear error.
//!
//! `cfg(model)` is set when the crate is built for a model checker (`--cfg loom` or
//! `--cfg shuttle`): the atomics and the futex calls are then the checker's (`src/model.rs`).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
    println!("cargo::rustc-check-cfg=cfg(shuttle)");
    println!("cargo::rustc-check-cfg=cfg(model)");
    println!("cargo::rerun-if-changed=build.rs");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os != "linux" {
        eprintln!(
            "error: futexkit supports Linux only (target OS is `{target_os}`): it is built on the \
             Linux futex(2) system calls"
        );
        std::process::exit(1);
    }
    let loom = std::env::var_os("CARGO_CFG_LOOM").is_some();
    let shuttle = std::env::var_os("CARGO_CFG_SHUTTLE").is_some();
    if loom && shuttle {
        eprintln!("error: futexkit builds for one model checker at a time (`--cfg loom` or `--cfg shuttle`)");
        std::process::exit(1);
    }
    if loom || shuttle {
        println!("cargo::rustc-cfg=model");
    }
}
