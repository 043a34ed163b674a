//! `Plain` from bytemuck's and zerocopy's derives (features `bytemuck` and `zerocopy`): the
//! bridged types live in a region's locks, and their values cross in and out whole. What the
//! bridges refuse (invalid bit patterns, over-aligned types) is in the macros' `compile_fail`
//! doc tests.
#![cfg(all(
    feature = "bytemuck",
    feature = "zerocopy",
    not(any(futexkit_loom, futexkit_shuttle))
))]

use futexkit::shared::Region;

#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Account {
    id: u64,
    balance: i64,
    history: [u32; 4],
}

#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Ledger {
    accounts: [Account; 2],
    total: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, zerocopy::FromBytes, zerocopy::IntoBytes)]
#[repr(C)]
struct Reading {
    sensor: u32,
    millivolts: i32,
    at_ns: u64,
}

// One call may name several types, with a trailing comma.
futexkit::plain_from_bytemuck!(Account, Ledger,);
futexkit::plain_from_zerocopy!(Reading);

#[test]
fn bridged_types_are_guarded_by_shared_locks() {
    let account = |id, balance| Account {
        id,
        balance,
        history: [0; 4],
    };
    let region = Region::builder()
        .mutex(
            "ledger",
            Ledger {
                accounts: [account(1, 100), account(2, 50)],
                total: 150,
            },
        )
        .rwlock(
            "reading",
            Reading {
                sensor: 3,
                millivolts: -40,
                at_ns: 0,
            },
        )
        .build()
        .unwrap();
    let ledger = region.mutex::<Ledger>("ledger").unwrap();
    let reading = region.rwlock::<Reading>("reading").unwrap();

    std::thread::scope(|s| {
        for step in 0..4u32 {
            s.spawn(move || {
                // Move 10 from account 1 to account 2, and log the step, under the lock.
                ledger.lock().unwrap().update(|l| {
                    l.accounts[0].balance -= 10;
                    l.accounts[1].balance += 10;
                    l.accounts[0].history[step as usize] = step + 1;
                });
                reading.write().unwrap().update(|r| {
                    r.millivolts += 10;
                    r.at_ns += 1;
                });
            });
        }
    });

    let l = ledger.lock().unwrap().get();
    assert_eq!(l.accounts[0].balance, 60);
    assert_eq!(l.accounts[1].balance, 90);
    assert_eq!(l.accounts[0].balance + l.accounts[1].balance, l.total);
    assert_eq!(l.accounts[0].history, [1, 2, 3, 4]);
    assert_eq!(
        reading.read().unwrap().get(),
        Reading {
            sensor: 3,
            millivolts: 0,
            at_ns: 4
        }
    );
}
