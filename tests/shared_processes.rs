//! futexkit::shared across processes started by `exec` (this test binary again, in a child
//! role named by `FUTEXKIT_SHARED_ROLE`, adopting the region from an inherited descriptor):
//! many processes taking each lock in turn and counting exactly, a condvar hand-off and barrier
//! rounds between processes. And a hostile sharer: a process that scribbles the region and
//! punches holes in it while this one keeps calling, which must make calls fail or wait,
//! never hang past a deadline or crash.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futexkit::shared::{LockError, Plain, Region};

/// Long enough that reaching it means a hang, not a slow machine.
const HANG: Duration = Duration::from_secs(120);

const ROLE: &str = "FUTEXKIT_SHARED_ROLE";
const FD: &str = "FUTEXKIT_SHARED_FD";

#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
struct Tally {
    count: u64,
    check: u64,
}

// SAFETY: two u64s, no padding.
unsafe impl Plain for Tally {}

const PROCESSES: usize = 6;
const EACH: u64 = 3_000;
const TURNS: u64 = 500;
const ROUNDS: u64 = 100;

fn region() -> Region {
    Region::builder()
        .mutex("tally", Tally::default())
        .rwlock("table", Tally::default())
        .mutex("turn", 0u64)
        .condvar("turned")
        .barrier("rounds", 4)
        .mutex("leaders", 0u64)
        .build()
        .unwrap()
}

/// Starts this test binary again as `role`, with the region's descriptor inherited.
fn spawn(test: &str, role: &str, region: &Region) -> (Child, OwnedFd) {
    let fd = region.inheritable_fd().unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(FD, fd.as_raw_fd().to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    (child, fd)
}

/// In a child: the role it was started as, and the region it was handed.
fn child_role() -> Option<(String, Region)> {
    let role = std::env::var(ROLE).ok()?;
    let fd: i32 = std::env::var(FD).unwrap().parse().unwrap();
    // SAFETY: the parent passed this descriptor, inherited open, for us to own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    Some((role, Region::from_fd(fd).unwrap()))
}

fn wait_all(children: Vec<(Child, OwnedFd)>, what: &str) {
    let start = Instant::now();
    for (mut child, _fd) in children {
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "{what}: a child failed: {status}");
                break;
            }
            if start.elapsed() > HANG {
                let _ = child.kill();
                panic!("{what}: a child hung");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn count(region: &Region) {
    let tally = region.mutex::<Tally>("tally").unwrap();
    let table = region.rwlock::<Tally>("table").unwrap();
    for i in 0..EACH {
        tally.lock().unwrap().update(|t| {
            assert_eq!(t.count, t.check, "a torn update");
            t.count += 1;
            t.check += 1;
        });
        if i % 3 == 0 {
            table.write().unwrap().update(|t| {
                t.count += 1;
                t.check = t.count;
            });
        } else {
            let t = table.read().unwrap().get();
            assert_eq!(t.count, t.check, "read a write in progress");
        }
    }
}

#[test]
fn many_processes_take_each_lock_in_turn_and_count_exactly() {
    if let Some((role, region)) = child_role() {
        assert_eq!(role, "count");
        count(&region);
        return;
    }
    let region = region();
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            spawn(
                "many_processes_take_each_lock_in_turn_and_count_exactly",
                "count",
                &region,
            )
        })
        .collect();
    count(&region);
    wait_all(children, "count");
    let total = (PROCESSES as u64 + 1) * EACH;
    assert_eq!(
        region
            .mutex::<Tally>("tally")
            .unwrap()
            .lock()
            .unwrap()
            .get(),
        Tally {
            count: total,
            check: total
        }
    );
    let writes = (PROCESSES as u64 + 1) * EACH.div_ceil(3);
    assert_eq!(
        region
            .rwlock::<Tally>("table")
            .unwrap()
            .read()
            .unwrap()
            .get()
            .count,
        writes
    );
}

/// Takes turns with the other process: odd turns are one's, even the other's.
fn take_turns(region: &Region, mine: u64) {
    let turn = region.mutex::<u64>("turn").unwrap();
    let turned = region.condvar("turned").unwrap();
    let mut guard = turn.lock().unwrap();
    loop {
        let t = guard.get();
        if t >= TURNS {
            return;
        }
        if t % 2 == mine {
            guard.set(t + 1);
            turned.notify_one();
        } else {
            guard = turned.wait_timeout(guard, HANG).unwrap().0;
        }
    }
}

#[test]
fn a_condvar_hands_turns_between_two_processes() {
    if let Some((role, region)) = child_role() {
        assert_eq!(role, "turns");
        take_turns(&region, 1);
        return;
    }
    let region = region();
    let child = spawn(
        "a_condvar_hands_turns_between_two_processes",
        "turns",
        &region,
    );
    take_turns(&region, 0);
    wait_all(vec![child], "turns");
    assert_eq!(
        region.mutex::<u64>("turn").unwrap().lock().unwrap().get(),
        TURNS
    );
}

fn barrier_rounds(region: &Region) {
    let rounds = region.barrier("rounds").unwrap();
    let leaders = region.mutex::<u64>("leaders").unwrap();
    let me = rounds.join().unwrap();
    for _ in 0..ROUNDS {
        if me.wait_timeout(HANG).unwrap().is_leader() {
            leaders.lock().unwrap().update(|n| *n += 1);
        }
    }
    // A second barrier pass so that nobody leaves (which breaks it) while others still wait.
    me.wait_timeout(HANG).unwrap();
    std::mem::forget(me);
}

#[test]
fn barrier_rounds_across_processes_have_one_leader_each() {
    if let Some((role, region)) = child_role() {
        assert_eq!(role, "rounds");
        barrier_rounds(&region);
        return;
    }
    let region = region();
    let children: Vec<_> = (0..3)
        .map(|_| {
            spawn(
                "barrier_rounds_across_processes_have_one_leader_each",
                "rounds",
                &region,
            )
        })
        .collect();
    barrier_rounds(&region);
    wait_all(children, "rounds");
    assert_eq!(
        region
            .mutex::<u64>("leaders")
            .unwrap()
            .lock()
            .unwrap()
            .get(),
        ROUNDS
    );
}

/// Values a scribbler writes beside random ones: every state bit and owner a protocol knows.
const TRICKY: [u32; 8] = [
    0,
    0x8000_0000,
    0x4000_0000,
    0xc000_0000,
    0x3fff_ffff,
    0xffff_ffff,
    1,
    0x7fff_ffff,
];

#[test]
fn a_process_that_scribbles_the_region_cannot_hang_or_crash_this_one() {
    let region = region();
    let before = file_bytes(&region);
    let len = before.len();
    let stop = AtomicBool::new(false);
    let calls = AtomicUsize::new(0);
    let worst = AtomicU64::new(0);
    // The scribbler: another process with its own mapping of the file.
    let scribbler = std::thread::scope(|s| {
        let scribbler = Command::new(std::env::current_exe().unwrap())
            .args(["scribble_child", "--exact", "--nocapture", "--ignored"])
            .env(FD, region.inheritable_fd().unwrap().as_raw_fd().to_string())
            .env("FUTEXKIT_SCRIBBLE_LEN", len.to_string())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        for thread in 0..4u64 {
            let (region, stop, calls, worst) = (&region, &stop, &calls, &worst);
            s.spawn(move || {
                let timeout = Duration::from_millis(20);
                let tally = region.mutex::<Tally>("tally").unwrap();
                let table = region.rwlock::<Tally>("table").unwrap();
                let turned = region.condvar("turned").unwrap();
                let rounds = region.barrier("rounds").unwrap();
                let mut i = thread;
                while !stop.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    match i % 6 {
                        0 => match tally.try_lock_for(timeout) {
                            Ok(mut guard) => guard.update(|t| t.count = t.count.wrapping_add(1)),
                            Err(LockError::OwnerDied(mut guard)) => guard.mark_consistent(),
                            Err(_) => {}
                        },
                        1 => {
                            if let Ok(guard) = tally.try_lock_for(timeout) {
                                let _ = turned.wait_timeout(guard, timeout);
                            }
                        }
                        2 => drop(table.try_read_for(timeout)),
                        3 => drop(table.try_write_for(timeout)),
                        4 => {
                            if let Ok(me) = rounds.join() {
                                let _ = me.wait_timeout(timeout);
                            }
                        }
                        _ => {
                            turned.notify_one();
                            turned.notify_all();
                        }
                    }
                    let took = start.elapsed().saturating_sub(timeout * 2);
                    worst.fetch_max(took.as_micros() as u64, Ordering::Relaxed);
                    assert!(took < HANG, "a call hung: {took:?} past its deadline");
                    calls.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            });
        }
        std::thread::sleep(Duration::from_millis(1_500));
        stop.store(true, Ordering::Relaxed);
        scribbler
    });
    let mut scribbler = scribbler;
    let _ = scribbler.kill();
    let _ = scribbler.wait();
    assert_ne!(file_bytes(&region), before, "the scribbler wrote nothing");
    println!(
        "{} calls beside a scribbler; the slowest returned {} us after its deadline",
        calls.load(Ordering::Relaxed),
        worst.load(Ordering::Relaxed)
    );
    assert!(calls.load(Ordering::Relaxed) > 0);
}

fn file_bytes(region: &Region) -> Vec<u8> {
    let mut file = std::fs::File::from(region.fd().try_clone_to_owned().unwrap());
    let mut bytes = Vec::new();
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0)).unwrap();
    std::io::Read::read_to_end(&mut file, &mut bytes).unwrap();
    bytes
}

/// The scribbler's body (run only as a child of the test above): writes random and tricky
/// words all over the region, and punches holes in its file, until killed.
#[test]
#[ignore = "run as a child process by a_process_that_scribbles_the_region_cannot_hang_or_crash_this_one"]
fn scribble_child() {
    let Ok(fd) = std::env::var(FD) else { return };
    let len: usize = std::env::var("FUTEXKIT_SCRIBBLE_LEN")
        .unwrap()
        .parse()
        .unwrap();
    let fd: i32 = fd.parse().unwrap();
    // SAFETY: maps the inherited region file shared; this process writes it only with atomic
    // stores, and the file is sealed against shrinking, so the mapping stays valid.
    let base = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    let words = len / 4;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id());
    let start = Instant::now();
    let mut n: u64 = 0;
    while start.elapsed() < HANG {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // The header too (beyond the first 64 bytes it is only read at adoption).
        let word = (x as usize >> 8) % words;
        let value = if x & 1 == 0 {
            TRICKY[(x >> 1) as usize % TRICKY.len()]
        } else {
            (x >> 32) as u32
        };
        // SAFETY: `word` is within the mapping; every access to the region is atomic.
        unsafe {
            (*base.cast::<std::sync::atomic::AtomicU32>().add(word)).store(value, Ordering::Relaxed)
        };
        n += 1;
        if n % 50_000 == 0 {
            // Punch a page-sized hole: its page reads back as zeros.
            let page = (x as usize >> 16) % len.div_ceil(4096);
            // SAFETY: fallocate on our inherited fd with integer arguments.
            unsafe {
                libc::fallocate(
                    fd,
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    (page * 4096) as i64,
                    4096,
                )
            };
        }
    }
}
