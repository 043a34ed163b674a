//! A one-value mailbox on futexkit's `Mutex` and `Condvar`: the user code that
//! `tests/loom.rs` model-checks, written as it would be for `std::sync`.
//!
//! ```
//! use futexkit_model_check_example::Mailbox;
//!
//! let mailbox = Mailbox::new();
//! mailbox.put(7);
//! assert_eq!(mailbox.take(), 7);
//! ```

use futexkit::sync::{Condvar, Mutex};

/// Holds at most one value: [`put`](Mailbox::put) waits while one is there, [`take`](Mailbox::take)
/// while none is.
#[derive(Default)]
pub struct Mailbox<T> {
    slot: Mutex<Option<T>>,
    changed: Condvar,
}

impl<T> Mailbox<T> {
    /// An empty mailbox.
    pub fn new() -> Mailbox<T> {
        Mailbox {
            slot: Mutex::new(None),
            changed: Condvar::new(),
        }
    }

    /// Puts `value` in, once the mailbox is empty.
    pub fn put(&self, value: T) {
        let mut slot = self
            .changed
            .wait_while(self.slot.lock().unwrap(), |slot| slot.is_some())
            .unwrap();
        *slot = Some(value);
        // Both a putter and a taker may wait on `changed`: wake them all, each rechecks.
        self.changed.notify_all();
    }

    /// Takes the value out, once there is one.
    pub fn take(&self) -> T {
        let mut slot = self
            .changed
            .wait_while(self.slot.lock().unwrap(), |slot| slot.is_none())
            .unwrap();
        let value = slot.take().expect("wait_while returned with a value");
        self.changed.notify_all();
        value
    }
}
