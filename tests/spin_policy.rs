//! The spin policy's decisions as a user sees them (`futexkit::spin::decisions`): every wait
//! that reaches the policy is counted once, as won, lost or skipped. Which one is asserted only
//! where it does not depend on the machine and its load. The counts are the process's, so
//! everything that counts runs in one test, one step after another.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::sync::Arc;
use std::time::Duration;

use futexkit::shared::SharedMutex;
use futexkit::spin::{decisions, Outcomes};
use futexkit::swap::Parker;
use futexkit::{Condvar, Mutex, RwLock};
use futexkit_support::condvar::{ping_pong, Futexkit};

fn total(o: Outcomes) -> u64 {
    o.won + o.lost + o.skipped
}

#[test]
fn every_wait_that_reaches_the_policy_is_counted() {
    a_condvar_wait_that_times_out_is_counted_as_lost_or_skipped();
    a_wait_after_a_notify_that_found_nobody_asleep_spins();
    a_wait_after_a_notify_that_woke_a_sleeper_sleeps_at_once();
    a_condvar_ping_pong_counts_its_waits();
    a_park_that_times_out_is_counted_as_a_hand_off_lost_or_skipped();
    a_flipcall_waiter_does_not_spin_for_a_peer_that_handed_over_from_its_cpu();
    a_lock_attempt_whose_deadline_has_passed_does_not_spin();
}

fn a_condvar_wait_that_times_out_is_counted_as_lost_or_skipped() {
    // The wait runs on a fresh thread, whose counts are all in once it has been joined.
    let before = decisions().notify;
    std::thread::spawn(|| wait_in_vain(Duration::from_millis(5), false))
        .join()
        .unwrap();
    let after = decisions().notify;
    assert!(after.lost + after.skipped > before.lost + before.skipped);
}

fn a_wait_after_a_notify_that_found_nobody_asleep_spins() {
    if futexkit::capabilities().usable_cpus() < 2 {
        return; // nothing spins with one CPU
    }
    // A fresh thread has no credit: its first wait would sleep at once (counted as skipped),
    // unless its own notify just found nobody asleep. Nobody notifies it, so the spin loses.
    // It spins only while every runnable thread on the machine has a CPU, which other
    // processes can make false at any moment: so each try is one wait, skipped or lost, and
    // some try must spin, unless the machine was busy whenever this test looked. The waiting
    // thread looks just before its wait and again after it, so that a try counts as idle
    // only if the machine was idle on both sides of the policy's own look (a look from this
    // thread, before the spawn, would miss the threads that run by the time the policy looks).
    let mut idle_looks = 0;
    for _ in 0..50 {
        let before = decisions().notify;
        let idle = std::thread::spawn(|| {
            let idle_before = every_runnable_thread_has_a_cpu();
            // Long enough that the deadline cannot pass before the policy decides.
            wait_in_vain(Duration::from_millis(20), true);
            idle_before && every_runnable_thread_has_a_cpu()
        })
        .join()
        .unwrap();
        let after = decisions().notify;
        assert_eq!(
            after.lost + after.skipped,
            before.lost + before.skipped + 1,
            "{before:?} -> {after:?}"
        );
        if after.lost == before.lost + 1 {
            return;
        }
        idle_looks += usize::from(idle);
        // Let the machine's other threads run before the next try.
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        idle_looks < 10,
        "no wait after a notify that found nobody asleep spun in 50 tries, though the machine \
         had a CPU for every runnable thread at {idle_looks} of them"
    );
    eprintln!("not checked: the machine was busy whenever this test looked");
}

/// Whether the machine has a CPU for every runnable thread now, as this test sees it: the
/// runnable count in `/proc/loadavg` (this thread included) at most the CPUs online.
fn every_runnable_thread_has_a_cpu() -> bool {
    let Ok(loadavg) = std::fs::read_to_string("/proc/loadavg") else {
        return false;
    };
    let runnable: Option<libc::c_long> = loadavg
        .split_whitespace()
        .nth(3)
        .and_then(|field| field.split_once('/'))
        .and_then(|(runnable, _)| runnable.parse().ok());
    // SAFETY: sysconf takes a plain name and touches no memory of ours.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    runnable.is_some_and(|r| r <= online)
}

/// Waits on a fresh Condvar that nobody notifies until `timeout` passes; first notifies it
/// itself (finding nobody asleep) if `notify_first`.
fn wait_in_vain(timeout: Duration, notify_first: bool) {
    let (mutex, condvar) = (Mutex::new(()), Condvar::new());
    let guard = mutex.lock().unwrap();
    if notify_first {
        condvar.notify_one();
    }
    let (_guard, result) = condvar.wait_timeout(guard, timeout).unwrap();
    assert!(result.timed_out());
}

/// Whether the thread `tid` of this process is asleep (state `S` in its `stat`).
fn is_asleep(tid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
    // The state follows the command name, which is in parentheses and may hold spaces.
    let after_name = &stat[stat.rfind(')').unwrap() + 1..];
    after_name.split_whitespace().next() == Some("S")
}

fn a_wait_after_a_notify_that_woke_a_sleeper_sleeps_at_once() {
    if futexkit::capabilities().usable_cpus() < 2 {
        return; // nothing spins with one CPU
    }
    // A sleeper on a Condvar: a fresh thread, whose one wait sleeps at once (no credit, not
    // its probe's turn) and is counted as skipped.
    let shared = Arc::new((Mutex::new(false), Condvar::new()));
    let (tid_sender, tid) = std::sync::mpsc::channel();
    let sleeper = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            tid_sender.send(gettid()).unwrap();
            let (mutex, condvar) = &*shared;
            let mut notified = mutex.lock().unwrap();
            while !*notified {
                notified = condvar.wait(notified).unwrap();
            }
        })
    };
    let tid = tid.recv().unwrap();
    // Nothing else puts it to sleep: asleep means asleep in the wait.
    let mut polls = 0;
    while !is_asleep(tid) {
        polls += 1;
        assert!(polls < 10_000, "the waiter never fell asleep");
        std::thread::sleep(Duration::from_millis(1));
    }
    let before = decisions().notify;
    // A fresh thread wakes it, then waits for a notify that never comes. Its notify woke a
    // sleeper, unlike one that found the waiters awake, so its wait sleeps at once too.
    std::thread::spawn(move || {
        let (mutex, condvar) = &*shared;
        *mutex.lock().unwrap() = true;
        condvar.notify_one();
        wait_in_vain(Duration::from_millis(5), false);
    })
    .join()
    .unwrap();
    sleeper.join().unwrap();
    let after = decisions().notify;
    assert_eq!(after.skipped, before.skipped + 2, "{before:?} -> {after:?}");
    assert_eq!(after.lost, before.lost, "{before:?} -> {after:?}");
    assert_eq!(after.won, before.won, "{before:?} -> {after:?}");
}

/// The calling thread's kernel id.
fn gettid() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

fn a_condvar_ping_pong_counts_its_waits() {
    const TURNS: u64 = 2_000;
    let before = total(decisions().notify);
    // The partner thread is joined inside; this thread's counts are read by `decisions`.
    ping_pong::<Futexkit>(TURNS);
    let counted = total(decisions().notify) - before;
    // A wait whose condition already held never reaches the policy, so fewer than 2 * TURNS
    // may be counted; but the side that passed the turn waits for it to come back.
    assert!(counted > 0, "no wait was counted");
}

fn a_park_that_times_out_is_counted_as_a_hand_off_lost_or_skipped() {
    let before = decisions().hand_off;
    std::thread::spawn(|| {
        let parker = Parker::new();
        let deadline = futexkit::futex::Deadline::after(Duration::from_millis(5));
        assert_eq!(
            parker.park(Some(deadline)),
            Err(futexkit::futex::Error::TimedOut)
        );
    })
    .join()
    .unwrap();
    let after = decisions().hand_off;
    assert!(after.lost + after.skipped > before.lost + before.skipped);
}

fn a_flipcall_waiter_does_not_spin_for_a_peer_that_handed_over_from_its_cpu() {
    if futexkit::capabilities().usable_cpus() < 2 {
        return; // nothing spins with one CPU
    }
    // Both sides pinned to one CPU: every hand-over is made from the waiter's own CPU, so after
    // the first round trip no wait of either side spins (each is counted as skipped), where
    // without the rule a spin would run out its budget while the peer waits for the CPU.
    let cpu = futexkit_support::pingpong::first_usable_cpu();
    let (before, after) = std::thread::spawn(move || {
        futexkit_support::pingpong::pin_to(cpu);
        let (mut client, mut server) = futexkit::flipcall::pair(8).unwrap();
        let server = std::thread::spawn(move || {
            futexkit_support::pingpong::pin_to(cpu);
            server.recv_first().unwrap();
            while server.send_recv(0).is_ok() {}
        });
        client.connect().unwrap();
        client.send_recv(0).unwrap();
        let before = decisions().hand_off;
        for _ in 0..2000 {
            client.send_recv(0).unwrap();
        }
        let after = decisions().hand_off;
        drop(client);
        server.join().unwrap();
        (before, after)
    })
    .join()
    .unwrap();
    // The client's own counts are all in (`decisions` flushes the calling thread's); the
    // server's come in batches, so they can only add to both figures.
    assert!(
        after.skipped - before.skipped >= 2000,
        "{before:?} -> {after:?}"
    );
    let spins = |o: Outcomes| o.won + o.lost;
    assert!(
        spins(after) - spins(before) < 100,
        "{before:?} -> {after:?}"
    );
}

fn a_lock_attempt_whose_deadline_has_passed_does_not_spin() {
    // Each lock is held by this thread; another thread's timed attempt whose deadline has
    // passed fails without asking the policy (it would otherwise spin out a lock's budget, then
    // mark the lock for a wake that nobody needs). The attempts' counts are all in once their
    // thread has been joined.
    let mutex = Mutex::new(());
    let rwlock = RwLock::new(());
    // SAFETY: kept in this frame until its guard and the attempts are gone, never moved.
    let shared = unsafe { SharedMutex::new(0u32) };
    let before = decisions().lock;
    let attempt = |f: &(dyn Fn() + Sync)| std::thread::scope(|s| s.spawn(f).join().unwrap());
    let _held = mutex.lock().unwrap();
    let _shared_held = shared.lock().unwrap();
    let read = rwlock.read().unwrap();
    attempt(&|| {
        assert!(mutex.try_lock_for(Duration::ZERO).is_err());
        assert!(rwlock.try_write_for(Duration::ZERO).is_err());
        assert!(shared.try_lock_for(Duration::ZERO).is_err());
    });
    drop(read);
    let _write = rwlock.write().unwrap();
    attempt(&|| assert!(rwlock.try_read_for(Duration::ZERO).is_err()));
    let after = decisions().lock;
    assert_eq!(total(after), total(before), "{before:?} -> {after:?}");
}

#[test]
fn decisions_print_every_kind() {
    let text = decisions().to_string();
    for kind in ["lock:", "notify:", "hand-off:"] {
        assert!(text.contains(kind), "{text}");
    }
}
