//! The robust list: how the kernel learns which process-shared lock words a thread holds, so
//! that when the thread dies (killed at any instruction, or exiting) it marks each of them
//! `OWNER_DIED` and wakes one of its waiters. `docs/design.md` ("Robust locks") says why this
//! mechanism and not another; `docs/kernel.md` ("Robust lists") has the kernel's side.
//!
//! ## What the kernel does
//!
//! Each thread may register one `robust_list_head` (`set_robust_list`). When the thread dies,
//! the kernel walks the singly linked list that starts there, and looks at one more entry,
//! `list_op_pending`. For each entry it reads the 32-bit lock word `futex_offset` bytes away; if
//! the word's low 30 bits are the dying thread's id, it sets the word to
//! `OWNER_DIED | (word & WAITERS)` and, if `WAITERS` was set, wakes one waiter. For the pending
//! entry it also wakes one waiter when the word's id bits are 0 (a release whose wake had not
//! been made, or a woken waiter that had not taken the lock).
//!
//! ## Sharing the list with the C library
//!
//! glibc registers a head for every thread it starts (its `futex_offset` is -32 on 64-bit
//! targets) and links its own robust mutexes in at the front, doubly linked: an entry's back
//! link lies 8 bytes before its `next`, and glibc's unlock relinks the two neighbours of the
//! entry it removes. futexkit links its words into that same list, so that both kinds of lock
//! stay robust in one thread:
//!
//! ```text
//! head -> [glibc] -> FRONT -> E3 -> S3 -> E2 -> S2 -> E1 -> S1 -> BACK -> [glibc] -> head
//! ```
//!
//! `FRONT`, `BACK` (the anchors) and one separator `S` after each futexkit entry `E` live in this
//! thread's own (heap) memory and are shaped like glibc's entries, with a lock word that is
//! always 0, which the kernel passes over. So:
//!
//! * glibc only ever writes the anchors (a glibc entry's neighbours are glibc entries, the head
//!   or an anchor), never an entry in shared memory;
//! * futexkit writes an entry's `next` once, when it links the entry, and relinks from a private
//!   record of the chain (`held`): unlinking `E2` writes `S3.next`, private memory. No list
//!   operation reads or writes another entry's shared memory, so a peer process that rewrites
//!   an entry's `next` cannot steer this thread's writes. The kernel's walk at the thread's
//!   death does read every linked entry, so no lock's memory goes away while a thread of this
//!   process holds it: a region keeps its mapping then (`Region`'s `Drop`), and a dropped
//!   `RawSharedMutex` is unlocked, or the process aborts (its `Drop`).
//!
//! Another C library's head cannot be shared (`Unsupported::ForeignList`), and where a thread
//! has none futexkit registers `own_head`. musl registers its head only when a thread first
//! locks a robust pthread mutex, replacing whatever was registered: after that, the kernel no
//! longer walks futexkit's list for that thread. futexkit does not look again at every lock (a
//! system call each); the README's kernel table says so.
//!
//! Only the kernel, walking the list at the thread's death, follows `E.next`: a hostile peer
//! that rewrites it can make the walk skip this thread's later entries or visit other memory of
//! the dying process, where the kernel changes only a 32-bit word equal to the dying thread's id.
//! And `E.next` itself tells every peer the address of a separator, on this process's heap.
//!
//! ## State (per thread: `ThreadList` in thread-local storage, `Chain` on the heap)
//!
//! | field | meaning | set | cleared |
//! |-------|---------|-----|---------|
//! | `ThreadList::chain` | the thread's `Chain` once its list is ready (null: not ready) | the first operation | the child handler after a `fork` (the chain is kept in `idle` for reuse); the thread's exit |
//! | `ThreadList::why_not` | why the thread cannot be ready (no robust list calls, a foreign list, exiting) | a failed first operation; the thread's exit | never |
//! | `ThreadList::tid` | this thread's id: what its lock words hold | the first operation (again after a `fork`) | never |
//! | `Chain::head` | the registered head: glibc's, or `own_head` where none was | the first operation | never |
//! | `Chain::held` | the entries linked between the anchors, oldest first, each with its separator | `link` pushes | `unlink` removes |
//! | `head.list_op_pending` | the entry of the operation under way | the start of every operation | its end |
//!
//! Each futexkit entry takes two places in the list (itself and its separator), so the
//! kernel's walk, which stops after 2048 entries, covers about a thousand locks held at once
//! by one thread (with glibc's beside them).
//!
//! Invariant: at every instruction, the chain the kernel would walk from `FRONT` to `BACK` is
//! `held` (newest first), except for the one entry of the operation under way, which
//! `list_op_pending` names until the operation ends. So a death at any instruction of a lock,
//! an unlock or a wait leaves the kernel a correct list: the word is marked if the thread held
//! it, and a waiter is woken if the word was free (the pending rule above).

use core::cell::Cell;
use core::fmt;
use core::sync::atomic::{compiler_fence, AtomicU32, AtomicUsize, Ordering};

use crate::futex::sys::{self, RobustListHead, MODEL_CHECKED};
use crate::futex::{Futex, Shared};

/// How far an entry lies after its lock word: the kernel's `futex_offset` is minus this
/// (glibc's value on 64-bit targets, which its head carries).
pub(crate) const WORD_BEFORE_ENTRY: usize = 32;

/// A lock word the kernel marks when its owner dies, followed by its robust-list entry (40
/// bytes). Word values: the owner's thread id in the low 30 bits (0: nobody), `WAITERS` (bit 31:
/// a thread may sleep on the word) and `OWNER_DIED` (bit 30), as [`crate::futex::pi_bits`].
#[repr(C, align(8))]
pub(crate) struct RobustWord {
    /// The lock word.
    pub(crate) word: Futex<Shared>,
    /// Zeros: room for later use, and what puts `next` at `WORD_BEFORE_ENTRY`. Atomics, as
    /// everything in shared memory that a peer may write.
    reserved: [AtomicU32; 7],
    /// The entry: the address of the next entry (a separator), written by the owning thread
    /// when it links the word. Read by the kernel only.
    next: AtomicUsize,
}

// The kernel finds the word `WORD_BEFORE_ENTRY` bytes before the entry. (A model checker's
// atomics are larger, and no kernel reads the list there.)
const _: () = assert!(
    MODEL_CHECKED || core::mem::offset_of!(RobustWord, next) == WORD_BEFORE_ENTRY,
    "the robust entry must lie WORD_BEFORE_ENTRY bytes after the word"
);

impl RobustWord {
    crate::futex::sys::const_fn! {
        /// A word holding `value`, not linked anywhere.
        pub(crate) const fn new(value: u32) -> RobustWord {
            RobustWord {
                word: Futex::shared(value),
                reserved: [const { AtomicU32::new(0) }; 7],
                next: AtomicUsize::new(0),
            }
        }
    }

    /// The entry's address, as the list holds it.
    fn entry(&self) -> usize {
        &self.next as *const AtomicUsize as usize
    }
}

/// A glibc-shaped entry in this thread's own memory: an anchor or a separator. Its lock word is
/// always 0, so the kernel's walk passes over it.
#[repr(C)]
struct PrivateEntry {
    /// Never the id of a thread.
    word: AtomicU32,
    _reserved: [u32; 5],
    /// glibc's back link (the address of the entry before), 8 bytes before `next`.
    prev: AtomicUsize,
    /// The next entry's address.
    next: AtomicUsize,
}

const _: () = assert!(core::mem::offset_of!(PrivateEntry, next) == WORD_BEFORE_ENTRY);
const _: () = assert!(core::mem::offset_of!(PrivateEntry, prev) + 8 == WORD_BEFORE_ENTRY);

impl PrivateEntry {
    const fn new() -> PrivateEntry {
        PrivateEntry {
            word: AtomicU32::new(0),
            _reserved: [0; 5],
            prev: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
        }
    }

    fn entry(&self) -> usize {
        &self.next as *const AtomicUsize as usize
    }
}

/// A head for a thread that has none (no C library registered one): glibc's shape, with the
/// back-link slot glibc keeps just before its head.
#[repr(C)]
struct OwnHead {
    prev: AtomicUsize,
    head: RobustListHead,
}

/// Why this thread cannot hold process-shared robust locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unsupported {
    /// `get_robust_list` or `set_robust_list` failed (a seccomp policy, say) with this errno.
    RobustListCalls {
        /// The errno the call returned.
        errno: i32,
    },
    /// The thread's robust list was registered by a C library whose lock layout is not
    /// glibc's: its `futex_offset` differs, so futexkit's words cannot join that list.
    ForeignLayout {
        /// The head's `futex_offset` (saturated to 32 bits).
        futex_offset: i32,
    },
    /// The thread's robust list belongs to a C library other than glibc, which futexkit does
    /// not know how to share it with.
    ForeignList,
    /// The thread is exiting (its thread-local state is gone).
    ThreadExiting,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsupported::RobustListCalls { errno } => write!(
                f,
                "the robust list system calls failed: {}",
                std::io::Error::from_raw_os_error(*errno)
            ),
            Unsupported::ForeignLayout { futex_offset } => write!(
                f,
                "this thread's robust list has futex_offset {futex_offset}, not glibc's -{WORD_BEFORE_ENTRY}"
            ),
            Unsupported::ForeignList => {
                f.write_str("this thread's robust list belongs to a C library other than glibc")
            }
            Unsupported::ThreadExiting => {
                f.write_str("the thread is exiting: it can no longer take robust locks")
            }
        }
    }
}

impl std::error::Error for Unsupported {}

/// Whether a head some library registered is glibc's (whose layout `PrivateEntry` follows).
/// Elsewhere only a head of futexkit's own is used.
const FOREIGN_HEADS_ARE_GLIBC: bool = cfg!(target_env = "gnu");

/// One linked entry and the separator after it.
struct Held {
    word: *const RobustWord,
    separator: Box<PrivateEntry>,
}

/// This thread's part of the list (on the heap: the anchors must not move, and must outlive
/// the thread-local storage when the thread exits holding a lock).
struct Chain {
    head: *mut RobustListHead,
    /// Registered by futexkit (no C library had one), else unused.
    own_head: OwnHead,
    front: PrivateEntry,
    back: PrivateEntry,
    held: Vec<Held>,
    /// Separators not in use, kept for the next lock. Boxed: a separator is linked by its
    /// address, which must not move when these vectors grow.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<PrivateEntry>>,
}

/// This thread's state. `chain` is non-null exactly when the thread is ready (`Ready` in the
/// module's table); otherwise `why_not` says why it cannot be (`Unsupported`, `Exited`), or
/// is `None` (`Unready`: the next operation starts it).
struct ThreadList {
    chain: Cell<*mut Chain>,
    why_not: Cell<Option<Unsupported>>,
    tid: Cell<u32>,
    /// A chain allocated before a `fork`, kept for the child's next start.
    idle: Cell<*mut Chain>,
}

// The model checkers' `thread_local!` takes no `const` initializer.
#[allow(clippy::missing_const_for_thread_local)]
mod local {
    crate::thread::thread_local! {
        pub(super) static THREAD: super::ThreadList = super::ThreadList::new();
    }
}
use local::THREAD;

impl ThreadList {
    const fn new() -> ThreadList {
        ThreadList {
            chain: Cell::new(core::ptr::null_mut()),
            why_not: Cell::new(None),
            tid: Cell::new(0),
            idle: Cell::new(core::ptr::null_mut()),
        }
    }

    /// This thread's chain and id, once its list is ready.
    #[inline]
    fn ready(&self) -> Result<(*mut Chain, u32), Unsupported> {
        let chain = self.chain.get();
        if chain.is_null() {
            return self.start();
        }
        Ok((chain, self.tid.get()))
    }

    #[cold]
    fn start(&self) -> Result<(*mut Chain, u32), Unsupported> {
        if let Some(why) = self.why_not.get() {
            return Err(why);
        }
        register_fork_handler();
        let tid = sys::current_tid();
        self.tid.set(tid);
        let mut chain = match core::ptr::NonNull::new(self.idle.replace(core::ptr::null_mut())) {
            // SAFETY: `idle` holds a chain from Box::into_raw that nothing else points to.
            Some(idle) => unsafe { Box::from_raw(idle.as_ptr()) },
            None => Box::new(Chain {
                head: core::ptr::null_mut(),
                own_head: OwnHead {
                    prev: AtomicUsize::new(0),
                    head: RobustListHead {
                        list_next: AtomicUsize::new(0),
                        futex_offset: -(WORD_BEFORE_ENTRY as isize),
                        list_op_pending: AtomicUsize::new(0),
                    },
                },
                front: PrivateEntry::new(),
                back: PrivateEntry::new(),
                held: Vec::new(),
                spare: Vec::new(),
            }),
        };
        if let Err(why) = chain.install() {
            self.why_not.set(Some(why));
            return Err(why);
        }
        let chain = Box::into_raw(chain);
        self.chain.set(chain);
        Ok((chain, tid))
    }

    /// After a `fork`, in the child: the C library emptied the list (the child owns none of
    /// its parent's locks) and the thread has a new id, so start afresh at the next operation,
    /// reusing the chain's memory.
    fn forget_after_fork(&self) {
        let chain = self.chain.replace(core::ptr::null_mut());
        if !chain.is_null() {
            // SAFETY: the chain is this thread's (copied by the fork), and no operation is
            // under way: the thread is in `fork`.
            let Chain { held, spare, .. } = unsafe { &mut *chain };
            spare.extend(held.drain(..).map(|h| h.separator));
            self.idle.set(chain);
        }
    }
}

impl Drop for ThreadList {
    /// The thread is exiting. With no lock held, take the anchors out of the C library's list
    /// (its storage may be freed before the kernel's walk) and free the chain. With locks held
    /// (their guards leaked), leave the chain linked for the kernel, which marks them as the
    /// thread dies, and leak it, since the kernel reads it then.
    fn drop(&mut self) {
        self.why_not.set(Some(Unsupported::ThreadExiting));
        let idle = self.idle.replace(core::ptr::null_mut());
        if !idle.is_null() {
            // SAFETY: from Box::into_raw, not linked anywhere (the fork emptied the list).
            drop(unsafe { Box::from_raw(idle) });
        }
        let chain = self.chain.replace(core::ptr::null_mut());
        if chain.is_null() {
            return;
        }
        // SAFETY: from Box::into_raw in `start`; this thread's, and nothing is under way.
        let chain = unsafe { Box::from_raw(chain) };
        if chain.held.is_empty() {
            chain.uninstall();
        } else {
            Box::leak(chain);
        }
    }
}

impl Chain {
    /// Finds this thread's head (registering one if nobody has) and links the anchors in at
    /// its front.
    fn install(&mut self) -> Result<(), Unsupported> {
        let registered =
            sys::robust_list_head().map_err(|errno| Unsupported::RobustListCalls { errno })?;
        let head = if registered.is_null() {
            let own = &mut self.own_head;
            let own_entry = &own.head as *const RobustListHead as usize;
            own.head.list_next.store(own_entry, Ordering::Relaxed);
            own.head.list_op_pending.store(0, Ordering::Relaxed);
            own.prev.store(own_entry, Ordering::Relaxed);
            let head = &mut own.head as *mut RobustListHead;
            // SAFETY: `head` lies in this chain's heap allocation, which is freed only after
            // the head is unregistered (`uninstall`) or leaked; only this thread changes it.
            unsafe { sys::set_robust_list(head) }
                .map_err(|errno| Unsupported::RobustListCalls { errno })?;
            head
        } else if !FOREIGN_HEADS_ARE_GLIBC {
            return Err(Unsupported::ForeignList);
        } else {
            // SAFETY: the kernel returned the head this thread registered: glibc's, in this
            // thread's descriptor, alive as long as the thread.
            let futex_offset = unsafe { (*registered).futex_offset };
            if futex_offset != -(WORD_BEFORE_ENTRY as isize) {
                let futex_offset = futex_offset.clamp(i32::MIN as isize, i32::MAX as isize) as i32;
                return Err(Unsupported::ForeignLayout { futex_offset });
            }
            registered
        };
        self.head = head;
        self.held.clear();
        // BACK first, then FRONT before it, as glibc links its own entries in.
        // SAFETY: `head` is this thread's registered head, glibc-shaped (checked above, or our
        // own), so every entry in its list has a back link 8 bytes before its `next`; the
        // anchors live in this heap allocation, which stays put.
        unsafe {
            link_at_front(head, &self.back);
            link_at_front(head, &self.front);
        }
        Ok(())
    }

    /// Takes the anchors out of the list (no futexkit entry is between them) and unregisters
    /// a head of our own.
    fn uninstall(&self) {
        // SAFETY: the anchors were linked by `install`; glibc has kept their back links and
        // the `next` of the entry before FRONT up to date, so these are the live neighbours.
        unsafe { unlink_pair(&self.front, &self.back) };
        if core::ptr::eq(self.head, &self.own_head.head) {
            // SAFETY: null unregisters; nothing of ours is left for the kernel to walk.
            let _ = unsafe { sys::set_robust_list(core::ptr::null_mut()) };
        }
    }

    fn head(&self) -> &RobustListHead {
        // SAFETY: the head registered for this thread (glibc's or our own), alive while the
        // thread is; only this thread writes it.
        unsafe { &*self.head }
    }

    /// Names `word`'s entry as the operation under way.
    #[inline]
    fn set_pending(&self, word: &RobustWord) {
        self.head()
            .list_op_pending
            .store(word.entry(), Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
    }

    #[inline]
    fn clear_pending(&self) {
        compiler_fence(Ordering::SeqCst);
        self.head().list_op_pending.store(0, Ordering::Relaxed);
    }

    /// Links `word` in after FRONT, with `separator` after it: the separator points at what
    /// FRONT pointed at, the entry at the separator; then FRONT points at the entry. A record
    /// of the same word left from before (its lock lost under this thread: a peer wrote its
    /// word, or its region went while a guard was leaked) is replaced, not linked twice, which
    /// would make the list a cycle. Allocates and frees nothing: `held` has room
    /// (`make_room`), and the replaced record's separator is returned, for the caller to keep
    /// once the chain is no longer borrowed.
    #[inline]
    fn link(
        &mut self,
        word: &RobustWord,
        separator: Box<PrivateEntry>,
    ) -> Option<Box<PrivateEntry>> {
        let replaced = if self.held.iter().any(|h| core::ptr::eq(h.word, word)) {
            self.unlink(word)
        } else {
            None
        };
        separator
            .next
            .store(self.front.next.load(Ordering::Relaxed), Ordering::Relaxed);
        word.next.store(separator.entry(), Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        self.front.next.store(word.entry(), Ordering::Relaxed);
        self.held.push(Held { word, separator });
        replaced
    }

    /// Unlinks `word` and its separator: the entry before them (FRONT or the next-newer
    /// entry's separator, both private) now points where the separator pointed. Returns the
    /// separator, or `None` if this thread has not linked `word` (it does not hold the lock).
    #[inline]
    fn unlink(&mut self, word: &RobustWord) -> Option<Box<PrivateEntry>> {
        // The newest entry, unlinked in the usual last-in, first-out order: FRONT points past it.
        if self
            .held
            .last()
            .is_some_and(|h| core::ptr::eq(h.word, word))
        {
            let held = self.held.pop().expect("just looked");
            self.front.next.store(
                held.separator.next.load(Ordering::Relaxed),
                Ordering::Relaxed,
            );
            compiler_fence(Ordering::SeqCst);
            return Some(held.separator);
        }
        let i = self
            .held
            .iter()
            .rposition(|h| core::ptr::eq(h.word, word))?;
        let after = self.held[i].separator.next.load(Ordering::Relaxed);
        let before = match self.held.get(i + 1) {
            Some(newer) => &newer.separator.next,
            None => &self.front.next,
        };
        before.store(after, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        Some(self.held.remove(i).separator)
    }
}

/// A separator for the next link, and room for its record: taken before the operation, so
/// that nothing allocates while the chain is borrowed (an allocator that took a shared lock
/// itself would otherwise find it borrowed).
#[inline]
fn make_room(chain: *mut Chain) -> Box<PrivateEntry> {
    // SAFETY (each `&mut *chain`): this thread's chain; each borrow ends within its statement.
    let spare = unsafe { &mut *chain }.spare.pop();
    let separator = match spare {
        Some(separator) => separator,
        None => Box::new(PrivateEntry::new()),
    };
    // SAFETY: as above.
    let held = unsafe { &*chain };
    if held.held.len() == held.held.capacity() {
        grow_held(chain);
    }
    separator
}

#[cold]
fn grow_held(chain: *mut Chain) {
    // SAFETY (each `&mut *chain`): as in `make_room`.
    let mut held = core::mem::take(&mut unsafe { &mut *chain }.held);
    held.reserve(4);
    // SAFETY: as above.
    unsafe { &mut *chain }.held = held;
}

/// Keeps a separator for later; `spare` grows outside any borrow of the chain.
#[inline]
fn keep_spare(chain: *mut Chain, separator: Box<PrivateEntry>) {
    // SAFETY (each `&mut *chain`): this thread's chain; each borrow ends within its statement.
    let spare = unsafe { &mut *chain };
    if spare.spare.len() < spare.spare.capacity() {
        // Room already: this push cannot allocate.
        spare.spare.push(separator);
    } else {
        grow_spare(chain, separator);
    }
}

#[cold]
fn grow_spare(chain: *mut Chain, separator: Box<PrivateEntry>) {
    // SAFETY (each `&mut *chain`): as in `keep_spare`.
    let mut spare = core::mem::take(&mut unsafe { &mut *chain }.spare);
    spare.push(separator);
    // SAFETY: as above.
    unsafe { &mut *chain }.spare = spare;
}

/// Links `entry` in at the front of the list starting at `head`, as glibc does.
///
/// # Safety
///
/// `head` must be this thread's registered head, every entry of its list glibc-shaped (a back
/// link 8 bytes before `next`), and `entry` must stay at its address while it is linked.
unsafe fn link_at_front(head: *mut RobustListHead, entry: &PrivateEntry) {
    // SAFETY: `head` is valid (the caller); its `list_next` is its first field.
    let head_next = unsafe { &(*head).list_next };
    let first = head_next.load(Ordering::Relaxed);
    // SAFETY: `first` is an entry of a glibc-shaped list (or the head, whose back-link slot
    // glibc and `OwnHead` keep before it), so its back link lies 8 bytes before it.
    let first_prev = unsafe { AtomicUsize::from_ptr(((first & !1) - 8) as *mut usize) };
    first_prev.store(entry.entry(), Ordering::Relaxed);
    entry.next.store(first, Ordering::Relaxed);
    entry.prev.store(head as usize, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    head_next.store(entry.entry(), Ordering::Relaxed);
}

/// Unlinks the adjacent pair `front`, `back` (front's `next` is back), as glibc unlinks an
/// entry: the entry before `front` now points at the one after `back`, whose back link points
/// at the entry before `front`.
///
/// # Safety
///
/// Both must be linked, adjacent, in this thread's glibc-shaped list.
unsafe fn unlink_pair(front: &PrivateEntry, back: &PrivateEntry) {
    let before = front.prev.load(Ordering::Relaxed) & !1;
    let after = back.next.load(Ordering::Relaxed);
    // SAFETY: `before` is the entry (or head) before `front`, kept up to date by glibc; its
    // `next` is at its own address. `after` is the entry (or head) after `back`, whose back link
    // lies 8 bytes before it.
    unsafe {
        AtomicUsize::from_ptr(before as *mut usize).store(after, Ordering::Relaxed);
        AtomicUsize::from_ptr(((after & !1) - 8) as *mut usize).store(before, Ordering::Relaxed);
    }
}

/// The child handler of `fork`, registered once per process.
fn register_fork_handler() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        if MODEL_CHECKED {
            return;
        }
        // Should this fail, a child would use its parent's thread id: its locks would not be
        // robust. pthread_atfork fails only without memory.
        let _ = sys::process::on_fork_in_child(after_fork_in_child);
    });
}

unsafe extern "C" fn after_fork_in_child() {
    let _ = THREAD.try_with(ThreadList::forget_after_fork);
}

/// Takes `word` for this thread: `take(tid)` runs with the word named as the operation under
/// way, and if it returns `Ok`, the word is linked into this thread's list before the
/// operation ends. A death at any instruction in between leaves the kernel a word it marks
/// (this thread's id in it) or wakes a waiter of (free).
#[inline]
pub(crate) fn acquire<R, E: From<Unsupported>>(
    word: &RobustWord,
    take: impl FnOnce(u32) -> Result<R, E>,
) -> Result<R, E> {
    let (chain, tid) = ready()?;
    let separator = make_room(chain);
    // SAFETY (each `&mut *chain` below): the chain is this thread's, from `ready`; each borrow
    // ends within its statement, and `take` runs between them, so none overlaps another.
    unsafe { &*chain }.set_pending(word);
    let taken = take(tid);
    let unused = if taken.is_ok() {
        // SAFETY: as above.
        unsafe { &mut *chain }.link(word, separator)
    } else {
        Some(separator)
    };
    // SAFETY: as above.
    unsafe { &*chain }.clear_pending();
    if let Some(separator) = unused {
        keep_spare(chain, separator);
    }
    taken
}

/// Releases `word`: it is unlinked first, then `release(tid)` runs, with the word named as the
/// operation under way throughout. Does nothing (and returns false) if this thread has not
/// linked the word: it does not hold it (a lock its parent held before a `fork`, or one it
/// still held when its exit began).
#[inline]
pub(crate) fn release(word: &RobustWord, release: impl FnOnce(u32)) -> bool {
    let Ok((chain, tid)) = THREAD.try_with(|thread| (thread.chain.get(), thread.tid.get())) else {
        return false;
    };
    if chain.is_null() {
        return false;
    }
    // SAFETY (each `&mut *chain`): as in `acquire`.
    unsafe { &*chain }.set_pending(word);
    // SAFETY: as above.
    let separator = unsafe { &mut *chain }.unlink(word);
    let held = separator.is_some();
    if held {
        release(tid);
    }
    // SAFETY: as above.
    unsafe { &*chain }.clear_pending();
    if let Some(separator) = separator {
        keep_spare(chain, separator);
    }
    held
}

/// Runs `wait(tid)` (a sleep on `word`, which this thread does not hold) with the word named as
/// the operation under way: should the thread die woken but before it acts, the kernel wakes
/// another waiter if the word is free.
pub(crate) fn waiting<R, E: From<Unsupported>>(
    word: &RobustWord,
    wait: impl FnOnce(u32) -> Result<R, E>,
) -> Result<R, E> {
    let (chain, tid) = ready()?;
    // SAFETY (each `&*chain`): as in `acquire`.
    unsafe { &*chain }.set_pending(word);
    let waited = wait(tid);
    // SAFETY: as above.
    unsafe { &*chain }.clear_pending();
    waited
}

/// This thread's id as its robust words hold it, or why it cannot hold any.
pub(crate) fn current_owner_id() -> Result<u32, Unsupported> {
    ready().map(|(_, tid)| tid)
}

/// Whether [`holds`] can tell: this thread's list is still there to look at (not after its
/// thread-local teardown began, when `holds` answers false whatever the thread holds).
pub(crate) fn can_tell_holds() -> bool {
    THREAD.try_with(|_| ()).is_ok()
}

/// Whether this thread has `word` linked: it holds the lock.
pub(crate) fn holds(word: &RobustWord) -> bool {
    holds_any(|held| core::ptr::eq(held, word))
}

/// Whether this thread has a word linked for which `is_it` answers true, looking at the
/// addresses only (a lock of several words asks for any of its own).
pub(crate) fn holds_any(is_it: impl Fn(*const RobustWord) -> bool) -> bool {
    THREAD
        .try_with(|thread| {
            let chain = thread.chain.get();
            // SAFETY: as in `acquire`; a shared borrow for this look only.
            !chain.is_null() && unsafe { &*chain }.held.iter().any(|h| is_it(h.word))
        })
        .unwrap_or(false)
}

#[inline]
fn ready() -> Result<(*mut Chain, u32), Unsupported> {
    THREAD
        .try_with(ThreadList::ready)
        .unwrap_or(Err(Unsupported::ThreadExiting))
}
