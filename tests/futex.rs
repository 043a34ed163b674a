//! The futex layer with real threads (and a real fork): every operation, its counts, its
//! errors. No test asserts on timing; waiters are known to be asleep by reading /proc.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use futexkit_support::blocked;

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use blocked::{gettid, spawn_blocked};
use futex2::NumaFutex;
use futexkit::futex::{
    futex2, pi_bits, Capability, Deadline, Error, Futex, Private, ScopeKind, Shared, WakeOp,
    WakeOpCmp, WakeOpKind,
};

fn has(cap: Capability) -> bool {
    futexkit::capabilities().has(cap)
}

/// The kernel has `cap`, whether or not `FUTEXKIT_DISABLE` turned it off: calls made anyway
/// reach it.
fn detected(cap: Capability) -> bool {
    futexkit::capabilities().detection(cap).detected()
}

#[test]
fn wake_ends_a_wait_and_reports_the_count() {
    let word = Arc::new(Futex::<Private>::new(0));
    let waiter = {
        let word = Arc::clone(&word);
        spawn_blocked(move || word.wait(0, None))
    };
    assert_eq!(word.wake(1), Ok(1));
    assert_eq!(waiter.join().unwrap(), Ok(()));
    assert_eq!(word.wake(1), Ok(0), "nobody is left to wake");
}

#[test]
fn update_and_wake_changes_the_word_and_wakes_in_one_call() {
    let word = Arc::new(Futex::<Private>::new(0b111));
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let word = Arc::clone(&word);
            spawn_blocked(move || word.wait(0b111, None))
        })
        .collect();
    assert_eq!(word.update_and_wake(WakeOpKind::AndNot, 0b101, 1), Ok(1));
    assert_eq!(word.load(Ordering::Relaxed), 0b010);
    // The second waiter is still queued (a wait that sees the new value would not be).
    assert_eq!(word.update_and_wake(WakeOpKind::Set, 2047, 5), Ok(1));
    assert_eq!(word.load(Ordering::Relaxed), 2047);
    for w in waiters {
        assert_eq!(w.join().unwrap(), Ok(()));
    }
    assert_eq!(word.wait(0b111, None), Err(Error::ValueChanged));
}

#[test]
fn wake_n_wakes_exactly_n() {
    let word = Arc::new(Futex::<Private>::new(0));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let word = Arc::clone(&word);
            spawn_blocked(move || word.wait(0, None))
        })
        .collect();
    assert_eq!(word.wake(2), Ok(2));
    assert_eq!(word.wake(u32::MAX), Ok(1));
    for w in waiters {
        assert_eq!(w.join().unwrap(), Ok(()));
    }
}

#[test]
fn wait_returns_at_once_when_the_value_differs() {
    let word = Futex::<Private>::new(5);
    assert_eq!(word.wait(4, None), Err(Error::ValueChanged));
    assert_eq!(
        word.wait(4, Some(Deadline::after(Duration::from_secs(60)))),
        Err(Error::ValueChanged)
    );
}

#[test]
fn deadlines_expire_on_both_clocks() {
    let word = Futex::<Private>::new(0);
    let deadline = Deadline::after(Duration::from_millis(20));
    assert_eq!(word.wait(0, Some(deadline)), Err(Error::TimedOut));
    assert!(deadline.has_passed());

    let instant = Instant::now() + Duration::from_millis(20);
    assert_eq!(
        word.wait(0, Some(Deadline::at(instant))),
        Err(Error::TimedOut)
    );
    assert!(Instant::now() >= instant);

    let wall = SystemTime::now() + Duration::from_millis(20);
    let deadline = Deadline::at_system_time(wall);
    assert_eq!(word.wait(0, Some(deadline)), Err(Error::TimedOut));
    assert!(SystemTime::now() >= wall);

    // A deadline in the past times out at once.
    let past = Deadline::at(Instant::now() - Duration::from_secs(1));
    assert_eq!(word.wait(0, Some(past)), Err(Error::TimedOut));
    assert_eq!(past.remaining(), Duration::ZERO);
}

#[test]
fn deadline_far_in_the_future_saturates() {
    let deadline = Deadline::after(Duration::MAX);
    assert!(!deadline.has_passed());
    assert!(deadline.remaining() > Duration::from_secs(1 << 40));
}

#[test]
fn bitsets_select_waiters() {
    let word = Arc::new(Futex::<Private>::new(0));
    let low = {
        let word = Arc::clone(&word);
        spawn_blocked(move || word.wait_bitset(0, 0b01, None))
    };
    let high = {
        let word = Arc::clone(&word);
        spawn_blocked(move || word.wait_bitset(0, 0b10, None))
    };
    assert_eq!(
        word.wake_bitset(10, 0b10),
        Ok(1),
        "only the high waiter matches"
    );
    assert_eq!(high.join().unwrap(), Ok(()));
    assert_eq!(word.wake_bitset(10, 0b100), Ok(0));
    assert_eq!(word.wake(10), Ok(1), "plain wake matches every bitset");
    assert_eq!(low.join().unwrap(), Ok(()));
}

#[test]
fn cmp_requeue_moves_waiters_and_counts_woken_plus_moved() {
    let from = Arc::new(Futex::<Private>::new(0));
    let to = Arc::new(Futex::<Private>::new(0));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let from = Arc::clone(&from);
            spawn_blocked(move || from.wait(0, None))
        })
        .collect();
    assert_eq!(from.cmp_requeue(0, 1, &to, 10), Ok(3), "1 woken + 2 moved");
    assert_eq!(from.wake(10), Ok(0), "nobody is left on the source word");
    assert_eq!(to.wake(10), Ok(2), "the moved waiters sleep on the target");
    for w in waiters {
        assert_eq!(w.join().unwrap(), Ok(()));
    }
}

#[test]
fn plain_requeue_moves_without_checking() {
    let from = Arc::new(Futex::<Private>::new(0));
    let to = Arc::new(Futex::<Private>::new(0));
    let waiter = {
        let from = Arc::clone(&from);
        spawn_blocked(move || from.wait(0, None))
    };
    from.store(9, Ordering::Relaxed);
    assert_eq!(from.requeue(0, &to, 1), Ok(1));
    assert_eq!(to.wake(1), Ok(1));
    assert_eq!(waiter.join().unwrap(), Ok(()));
}

#[test]
fn cmp_requeue_refuses_a_changed_value() {
    let from = Arc::new(Futex::<Private>::new(0));
    let to = Futex::<Private>::new(0);
    let waiter = {
        let from = Arc::clone(&from);
        spawn_blocked(move || from.wait(0, None))
    };
    from.store(1, Ordering::Relaxed);
    assert_eq!(from.cmp_requeue(0, 1, &to, 1), Err(Error::ValueChanged));
    assert_eq!(
        from.wake(1),
        Ok(1),
        "the waiter was neither woken nor moved"
    );
    assert_eq!(waiter.join().unwrap(), Ok(()));
}

#[test]
fn wake_op_does_its_arithmetic_and_compares_the_old_value() {
    let a = Futex::<Private>::new(0);
    let b = Futex::<Private>::new(0b1100);
    let run = |kind, arg, cmp, cmparg| {
        a.wake_op(1, &b, 1, WakeOp::new(kind, arg, cmp, cmparg).unwrap())
            .unwrap();
        b.load(Ordering::Relaxed)
    };
    assert_eq!(run(WakeOpKind::Add, 3, WakeOpCmp::Eq, 0), 0b1111);
    assert_eq!(run(WakeOpKind::AndNot, 0b0101, WakeOpCmp::Ne, 0), 0b1010);
    assert_eq!(run(WakeOpKind::Or, 0b0001, WakeOpCmp::Lt, 1), 0b1011);
    assert_eq!(run(WakeOpKind::Xor, 0b1111, WakeOpCmp::Ge, 0), 0b0100);
    assert_eq!(run(WakeOpKind::Set, 77, WakeOpCmp::Le, 4), 77);
    let shifted = WakeOp::new(WakeOpKind::Set, 4, WakeOpCmp::Gt, 0)
        .unwrap()
        .with_shifted_operand()
        .unwrap();
    a.wake_op(1, &b, 1, shifted).unwrap();
    assert_eq!(b.load(Ordering::Relaxed), 1 << 4);
}

#[test]
fn wake_op_wakes_the_second_word_only_when_the_comparison_holds() {
    let a = Arc::new(Futex::<Private>::new(0));
    let b = Arc::new(Futex::<Private>::new(5));
    let b_waiter = {
        let b = Arc::clone(&b);
        spawn_blocked(move || b.wait(5, None))
    };
    // old b (5) > 9 is false: b's waiter stays asleep.
    let op = WakeOp::new(WakeOpKind::Add, 0, WakeOpCmp::Gt, 9).unwrap();
    assert_eq!(a.wake_op(1, &b, 1, op), Ok(0));
    // old b (5) == 5: b's waiter is woken (b becomes 6).
    let op = WakeOp::new(WakeOpKind::Add, 1, WakeOpCmp::Eq, 5).unwrap();
    assert_eq!(a.wake_op(1, &b, 1, op), Ok(1));
    assert_eq!(b_waiter.join().unwrap(), Ok(()));
    assert_eq!(b.load(Ordering::Relaxed), 6);
}

#[test]
fn pi_lock_hands_over_and_reports_deadlock_to_the_owner() {
    if !has(Capability::Pi) {
        return;
    }
    let lock = Arc::new(Futex::<Private>::new(0));
    lock.lock_pi(None).unwrap();
    assert_eq!(lock.load(Ordering::Relaxed) & pi_bits::TID_MASK, gettid());
    assert_eq!(lock.lock_pi(None), Err(Error::WouldDeadlock));
    assert_eq!(lock.trylock_pi(), Err(Error::WouldDeadlock));

    let contender = {
        let lock = Arc::clone(&lock);
        spawn_blocked(move || {
            lock.lock_pi(None).unwrap();
            let owner = lock.load(Ordering::Relaxed) & pi_bits::TID_MASK;
            let me = gettid();
            lock.unlock_pi().unwrap();
            (owner, me)
        })
    };
    assert_ne!(lock.load(Ordering::Relaxed) & pi_bits::WAITERS, 0);
    lock.unlock_pi().unwrap();
    let (owner, contender_tid) = contender.join().unwrap();
    assert_eq!(owner, contender_tid, "the lock was handed to the waiter");
    assert_eq!(lock.load(Ordering::Relaxed), 0);
}

#[test]
fn pi_errors_are_typed() {
    if !has(Capability::Pi) {
        return;
    }
    let lock = Arc::new(Futex::<Private>::new(0));
    assert_eq!(lock.unlock_pi(), Err(Error::PermissionDenied));
    {
        let lock = Arc::clone(&lock);
        std::thread::spawn(move || lock.trylock_pi().unwrap())
            .join()
            .unwrap();
    }
    // The owner exited holding it; either way it is not ours to take without blocking.
    assert!(lock.trylock_pi().is_err());

    let owner = Arc::new(Futex::<Private>::new(0));
    {
        let holder_lock = Arc::clone(&owner);
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            holder_lock.lock_pi(None).unwrap();
            tx.send(()).unwrap();
            done_rx.recv().unwrap();
            holder_lock.unlock_pi().unwrap();
        });
        rx.recv().unwrap();
        let deadline = Deadline::after(Duration::from_millis(20));
        assert_eq!(owner_lock(&owner, deadline), Err(Error::TimedOut));
        done_tx.send(()).unwrap();
        holder.join().unwrap();
    }
}

fn owner_lock(lock: &Futex<Private>, deadline: Deadline) -> Result<(), Error> {
    lock.lock_pi(Some(deadline))
}

#[test]
fn lock_pi2_takes_monotonic_deadlines() {
    if !has(Capability::LockPi2) {
        let lock = Futex::<Private>::new(0);
        assert_eq!(lock.lock_pi2(None), Err(Error::Unsupported));
        return;
    }
    let lock = Arc::new(Futex::<Private>::new(0));
    lock.lock_pi2(None).unwrap();
    let other = Arc::clone(&lock);
    let r = std::thread::spawn(move || {
        other.lock_pi2(Some(Deadline::after(Duration::from_millis(20))))
    })
    .join()
    .unwrap();
    assert_eq!(r, Err(Error::TimedOut));
    lock.unlock_pi().unwrap();
}

#[test]
fn lock_pi_on_an_owner_died_word_reports_it_and_holds_the_lock() {
    if !has(Capability::Pi) {
        return;
    }
    let lock = Futex::<Private>::new(pi_bits::OWNER_DIED);
    assert_eq!(lock.lock_pi(None), Err(Error::OwnerDied));
    let word = lock.load(Ordering::Relaxed);
    assert_eq!(word & pi_bits::TID_MASK, gettid(), "the caller owns it now");
    lock.unlock_pi().unwrap();
}

#[test]
fn wait_requeue_pi_wakes_holding_the_pi_lock() {
    if !has(Capability::RequeuePi) {
        return;
    }
    let cond = Arc::new(Futex::<Private>::new(0));
    let pi_lock = Arc::new(Futex::<Private>::new(0));
    let waiter = {
        let (cond, pi_lock) = (Arc::clone(&cond), Arc::clone(&pi_lock));
        spawn_blocked(move || {
            cond.wait_requeue_pi(0, &pi_lock, None).unwrap();
            let owner = pi_lock.load(Ordering::Relaxed) & pi_bits::TID_MASK;
            let me = gettid();
            pi_lock.unlock_pi().unwrap();
            (owner, me)
        })
    };
    assert_eq!(
        cond.cmp_requeue_pi(1, &pi_lock, 0),
        Err(Error::ValueChanged)
    );
    assert_eq!(cond.cmp_requeue_pi(0, &pi_lock, 0), Ok(1));
    let (owner, me) = waiter.join().unwrap();
    assert_eq!(owner, me);
}

#[test]
fn futex2_wait_wake_and_requeue() {
    if !detected(Capability::Futex2) {
        // The fallback a pre-6.7 kernel gets: every futex2 call says Unsupported, none blocks.
        let word = Futex::<Private>::new(0);
        let to = Futex::<Private>::new(0);
        let addr: *const AtomicU32 = &*word;
        assert_eq!(
            futex2::wait(&*word, ScopeKind::Private, 0, futex2::MASK_ANY_U32, None),
            Err(Error::Unsupported)
        );
        assert_eq!(
            futex2::wake(addr, ScopeKind::Private, futex2::MASK_ANY_U32, 1),
            Err(Error::Unsupported)
        );
        assert_eq!(
            futex2::requeue(&word, 0, 0, &to, 1),
            Err(Error::Unsupported)
        );
        return;
    }
    if !has(Capability::Futex2) {
        return;
    }
    let word = Arc::new(Futex::<Private>::new(0));
    let waiter = {
        let word = Arc::clone(&word);
        spawn_blocked(move || futex2::wait(&**word, ScopeKind::Private, 0, 0b10, None))
    };
    let addr: *const AtomicU32 = &**word;
    assert_eq!(futex2::wake(addr, ScopeKind::Private, 0b01, 10), Ok(0));
    assert_eq!(futex2::wake(addr, ScopeKind::Private, 0b11, 10), Ok(1));
    assert_eq!(waiter.join().unwrap(), Ok(()));

    let to = Futex::<Private>::new(0);
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let word = Arc::clone(&word);
            spawn_blocked(move || word.wait(0, None))
        })
        .collect();
    assert_eq!(
        futex2::requeue(&word, 1, 0, &to, 5),
        Err(Error::ValueChanged)
    );
    assert_eq!(futex2::requeue(&word, 0, 0, &to, 5), Ok(2));
    assert_eq!(to.wake(5), Ok(2));
    for w in waiters {
        assert_eq!(w.join().unwrap(), Ok(()));
    }
    let deadline = Deadline::after(Duration::from_millis(10));
    assert_eq!(
        futex2::wait(
            &*to,
            ScopeKind::Private,
            0,
            futex2::MASK_ANY_U32,
            Some(deadline)
        ),
        Err(Error::TimedOut)
    );
}

#[test]
fn waitv_wakes_on_any_of_its_words() {
    if !detected(Capability::Waitv) {
        // The fallback a pre-5.16 kernel gets: Unsupported at once, even for a matching word.
        let word = Futex::<Private>::new(0);
        assert_eq!(
            futex2::waitv(&[futex2::WaitvEntry::new(&word, 0)], None),
            Err(Error::Unsupported)
        );
        return;
    }
    if !has(Capability::Waitv) {
        return;
    }
    let words: Arc<Vec<Futex<Private>>> = Arc::new((0..5).map(|_| Futex::new(0)).collect());
    let waiter = {
        let words = Arc::clone(&words);
        spawn_blocked(move || {
            let entries: Vec<_> = words
                .iter()
                .map(|w| futex2::WaitvEntry::new(w, 0))
                .collect();
            futex2::waitv(&entries, None)
        })
    };
    assert_eq!(words[3].wake(1), Ok(1));
    assert_eq!(waiter.join().unwrap(), Ok(3), "the index of the woken word");

    let entries: Vec<_> = words
        .iter()
        .map(|w| futex2::WaitvEntry::new(w, 0))
        .collect();
    let deadline = Deadline::after(Duration::from_millis(10));
    assert_eq!(
        futex2::waitv(&entries, Some(deadline)),
        Err(Error::TimedOut)
    );
    words[4].store(1, Ordering::Relaxed);
    assert_eq!(futex2::waitv(&entries, None), Err(Error::ValueChanged));
}

#[test]
fn waitv_takes_up_to_128_words() {
    if !has(Capability::Waitv) {
        return;
    }
    let words: Vec<Futex<Private>> = (0..=futex2::WAITV_MAX).map(|_| Futex::new(0)).collect();
    let mut entries: Vec<_> = words
        .iter()
        .map(|w| futex2::WaitvEntry::new(w, 0))
        .collect();
    assert_eq!(
        futex2::waitv(&entries, None),
        Err(Error::TooManyWords {
            given: 129,
            max: 128
        })
    );
    entries.pop();
    let deadline = Deadline::after(Duration::from_millis(5));
    assert_eq!(
        futex2::waitv(&entries, Some(deadline)),
        Err(Error::TimedOut)
    );
    assert_eq!(futex2::waitv(&[], None), Err(Error::InvalidArgument));
}

#[test]
fn numa_futex_where_the_kernel_has_it() {
    let word = NumaFutex::new(1);
    if !has(Capability::Numa) {
        assert_eq!(
            word.wait(ScopeKind::Private, 0, false, None),
            Err(Error::Unsupported)
        );
        return;
    }
    assert_eq!(
        word.wait(ScopeKind::Private, 0, false, None),
        Err(Error::ValueChanged)
    );
    assert_eq!(word.wake(ScopeKind::Private, 1, false), Ok(0));
    let deadline = Deadline::after(Duration::from_millis(5));
    assert_eq!(
        word.wait(ScopeKind::Private, 1, false, Some(deadline)),
        Err(Error::TimedOut)
    );
    assert_ne!(
        word.node().load(Ordering::Relaxed),
        NumaFutex::ANY_NODE,
        "the kernel chose a node"
    );
    if has(Capability::Mpol) {
        assert_eq!(word.wake(ScopeKind::Private, 1, true), Ok(0));
    }
}

#[test]
fn bad_input_gets_typed_errors() {
    let null: *const Futex<Private> = std::ptr::null();
    assert_eq!(Futex::wake_at(null, 1), Err(Error::InvalidArgument));
    let words = [AtomicU32::new(0), AtomicU32::new(0)];
    let unaligned = (words.as_ptr() as usize + 1) as *const Futex<Private>;
    assert_eq!(Futex::wake_at(unaligned, 1), Err(Error::InvalidArgument));
    assert_eq!(
        futex2::wake(
            (words.as_ptr() as usize + 2) as *const AtomicU32,
            ScopeKind::Private,
            1,
            1
        ),
        Err(Error::InvalidArgument)
    );

    let word = Futex::<Private>::new(0);
    assert_eq!(word.wait_bitset(0, 0, None), Err(Error::InvalidArgument));
    assert_eq!(word.wake_bitset(1, 0), Err(Error::InvalidArgument));
    assert_eq!(word.requeue(1, &word, 1), Err(Error::InvalidArgument));
    assert_eq!(
        WakeOp::new(WakeOpKind::Add, 4096, WakeOpCmp::Eq, 0),
        Err(Error::InvalidArgument)
    );
    // The kernel sign-extends the 12-bit fields: 2048 would arrive as -2048.
    assert_eq!(
        WakeOp::new(WakeOpKind::Set, 2048, WakeOpCmp::Eq, 0),
        Err(Error::InvalidArgument)
    );
    assert_eq!(
        word.update_and_wake(WakeOpKind::Set, 2048, 1),
        Err(Error::InvalidArgument)
    );
    assert_eq!(
        WakeOp::new(WakeOpKind::Add, 32, WakeOpCmp::Eq, 0).and_then(WakeOp::with_shifted_operand),
        Err(Error::InvalidArgument)
    );

    // Unsupported sizes: kernels implement only 32-bit futex2 words so far.
    let byte = AtomicU8::new(0);
    if has(Capability::Futex2) {
        assert_eq!(
            futex2::wait(&byte, ScopeKind::Private, 1, 0xff, None),
            Err(Error::Unsupported)
        );
    }
    assert_eq!(
        futex2::wait(&byte, ScopeKind::Private, 256, 0xff, None),
        Err(Error::InvalidArgument),
        "a value that does not fit the size"
    );
    assert_eq!(
        futex2::wait(&byte, ScopeKind::Private, 0, 0, None),
        Err(Error::InvalidArgument),
        "a zero mask"
    );
}

#[test]
fn errors_display_and_convert() {
    let all = [
        Error::ValueChanged,
        Error::TimedOut,
        Error::Interrupted,
        Error::WouldBlock,
        Error::WouldDeadlock,
        Error::OwnerDied,
        Error::NoSuchOwner,
        Error::PermissionDenied,
        Error::Unsupported,
        Error::InvalidArgument,
        Error::Fault,
        Error::TooManyWords {
            given: 200,
            max: 128,
        },
        Error::OutOfMemory,
        Error::Os {
            errno: libc_ebusy(),
        },
    ];
    for e in all {
        assert!(!e.to_string().is_empty());
        let io: std::io::Error = e.into();
        assert!(io.get_ref().is_some());
    }
    let io: std::io::Error = Error::TimedOut.into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
}

fn libc_ebusy() -> i32 {
    16
}

#[test]
fn from_atomic_and_wake_at_share_the_word() {
    let raw = Arc::new(AtomicU32::new(0));
    let waiter = {
        let raw = Arc::clone(&raw);
        spawn_blocked(move || Futex::<Private>::from_atomic(&raw).wait(0, None))
    };
    let futex: &Futex<Private> = Futex::from_atomic(&raw);
    assert_eq!(Futex::wake_at(futex.as_ptr(), 1), Ok(1));
    assert_eq!(waiter.join().unwrap(), Ok(()));
}

#[test]
fn shared_futex_works_across_fork() {
    // One shared anonymous page holds the word; the child waits on it, the parent wakes it.
    let len = 4096;
    // SAFETY: a fresh anonymous shared mapping; checked below.
    let page = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
        )
    }
    .expect("mmap");
    // SAFETY: the page is aligned, zeroed, live until munmap below, and only used atomically.
    let word: &Futex<Shared> = unsafe { Futex::from_ptr(page.cast::<u32>()) };
    let ready: &Futex<Shared> = unsafe { Futex::from_ptr(page.cast::<u32>().add(1)) };

    // SAFETY: the child only makes futex syscalls and atomic accesses, then _exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        ready.store(1, Ordering::SeqCst);
        let _ = ready.wake(1);
        let mut code = 1;
        for _ in 0..1000 {
            match word.wait(0, Some(Deadline::after(Duration::from_secs(30)))) {
                Err(Error::TimedOut) => break,
                _ if word.load(Ordering::SeqCst) == 7 => {
                    code = 0;
                    break;
                }
                _ => {}
            }
        }
        // SAFETY: _exit is async-signal-safe and skips the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    while ready.load(Ordering::SeqCst) == 0 {
        let _ = ready.wait(0, Some(Deadline::after(Duration::from_millis(100))));
    }
    word.store(7, Ordering::SeqCst);
    // The child may not be asleep yet; the value change covers that case.
    let _ = word.wake(1);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status}"
    );
    // SAFETY: unmapping the mapping made above; `word` and `ready` are not used after this.
    unsafe { rustix::mm::munmap(page, len) }.unwrap();
}
