// `wait_until_blocked`, on its own so that the crate's unit tests can `include!` it too.

use std::time::{Duration, Instant};

/// Waits until thread `tid` of this process is asleep in a futex call, so a test can wake it
/// and count it. Reads `/proc/self/task/TID/{stat,wchan}`; where the kernel hides `wchan`, a
/// sleeping state is taken as enough. Gives up (panics) after 60 s: a hang is a failure.
pub fn wait_until_blocked(tid: u32) {
    let stat_path = format!("/proc/self/task/{tid}/stat");
    let wchan_path = format!("/proc/self/task/{tid}/wchan");
    let start = Instant::now();
    let mut last_wchan = String::new();
    loop {
        let stat = std::fs::read_to_string(&stat_path).unwrap_or_default();
        // The state follows the parenthesised command name.
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next());
        if state == Some("S") {
            let wchan = std::fs::read_to_string(&wchan_path).unwrap_or_default();
            // PI futex waiters sleep in the rt_mutex code.
            let in_futex = wchan.contains("futex") || wchan.contains("rt_mutex");
            if in_futex || wchan.trim() == "0" || wchan.is_empty() {
                return;
            }
            last_wchan = wchan;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "thread {tid} never blocked in a futex call (last wchan {last_wchan:?})"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
