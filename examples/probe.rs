//! Prints the running kernel's futex capabilities, each with how it was decided.
//!
//! `cargo run --example probe`; try `FUTEXKIT_DISABLE=futex2,pi` to see overrides.

use futexkit::Capability;

fn main() {
    let caps = futexkit::capabilities();
    println!("kernel      {}", caps.kernel_release());
    println!("usable cpus {}", caps.usable_cpus());
    for cap in Capability::ALL {
        let d = caps.detection(cap);
        let state = match (d.detected(), d.disabled()) {
            (true, false) => "yes",
            (true, true) => "disabled",
            (false, _) => "no",
        };
        println!("{:<11} {:<8} {}", cap.name(), state, d.evidence());
    }
    if !caps.ignored_names().is_empty() {
        println!(
            "FUTEXKIT_DISABLE / FUTEXKIT_ENABLE: ignored unknown names {:?}",
            caps.ignored_names()
        );
    }
}
