//! Declares futexkit's cfgs and refuses non-Linux targets with one clear error.
//!
//! The model checkers are opt-in twice over, so that neither a dependent's lock file nor a
//! build that model-checks some other crate ever switches futexkit onto emulated futexes: the
//! `loom` or `shuttle` feature brings the checker in as a dependency (inert by itself), and
//! `--cfg futexkit_loom` or `--cfg futexkit_shuttle` in `RUSTFLAGS` switches the crate onto it:
//! the atomics and the futex calls are then the checker's (`src/futex/sys/model.rs`). The code
//! tests those two cfgs itself, so nothing derived from them can go stale between builds; this
//! script only refuses the combinations that cannot build.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(futexkit_loom)");
    println!("cargo::rustc-check-cfg=cfg(futexkit_shuttle)");
    println!("cargo::rustc-check-cfg=cfg(docsrs)");
    println!("cargo::rerun-if-changed=build.rs");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os != "linux" {
        fail(&format!(
            "futexkit supports Linux only (target OS is `{target_os}`): it is built on the Linux \
             futex(2) system calls"
        ));
    }
    let set = |name: &str| std::env::var_os(name).is_some();
    let loom = set("CARGO_CFG_FUTEXKIT_LOOM");
    let shuttle = set("CARGO_CFG_FUTEXKIT_SHUTTLE");
    if loom && shuttle {
        fail(
            "futexkit builds for one model checker at a time (`--cfg futexkit_loom` or \
             `--cfg futexkit_shuttle`)",
        );
    }
    for (on, feature, checker) in [
        (loom, "CARGO_FEATURE_LOOM", "loom"),
        (shuttle, "CARGO_FEATURE_SHUTTLE", "shuttle"),
    ] {
        if on && !set(feature) {
            fail(&format!(
                "`--cfg futexkit_{checker}` needs futexkit's `{checker}` feature, which brings \
                 {checker} in: add `features = [\"{checker}\"]` to the futexkit dependency that \
                 the model-checked build uses, or pass `--features futexkit/{checker}`"
            ));
        }
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}
