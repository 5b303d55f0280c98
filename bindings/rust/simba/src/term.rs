use std::ffi::{c_void, CStr};
use std::mem::ManuallyDrop;
use std::os::fd::{BorrowedFd, RawFd};
use std::time::Duration;

use simba_sys as sys;

use crate::error::{check, Error, Result};
use crate::util::{ms_duration, run_callback, span_ms, wait_ms, with_completion, Completion, OneShot};

c_enum! {
    /// Why a term ended. `Display` prints the library's name (`STOPPED`, ...;
    /// `simba_revoke_reason_name`).
    pub enum RevokeReason, raw raw, named sys::simba_revoke_reason_name {
        /// The election was stopped, the lock released, or the client closed.
        Stopped = sys::SIMBA_REVOKE_STOPPED,
        /// The election stepped down.
        SteppedDown = sys::SIMBA_REVOKE_STEPPED_DOWN,
        /// The session's local deadline passed without a successful keep-alive.
        DeadlinePassed = sys::SIMBA_REVOKE_DEADLINE_PASSED,
        /// The backend reported the session expired.
        SessionExpired = sys::SIMBA_REVOKE_SESSION_EXPIRED,
        /// A keep-alive no longer lists the lease as this session's.
        TakenOver = sys::SIMBA_REVOKE_TAKEN_OVER,
    }
}

c_enum! {
    /// What a term is a term of (`simba_term_kind`, libsimba 1.5). `Display`
    /// prints the library's name (`ELECTION`, `LOCK`, `SEMAPHORE`, `READ`, `WRITE`).
    pub enum TermKind, raw raw, named sys::simba_term_kind_name {
        /// An election's (and a task's) term.
        Election = sys::SIMBA_TERM_ELECTION,
        /// A lock's term.
        Lock = sys::SIMBA_TERM_LOCK,
        /// A permit of a semaphore.
        Semaphore = sys::SIMBA_TERM_SEMAPHORE,
        /// A read lock of a read/write lock.
        Read = sys::SIMBA_TERM_READ,
        /// A write lock of a read/write lock.
        Write = sys::SIMBA_TERM_WRITE,
    }
}

/// The mode of a read/write lock (`simba_lock_mode_t`, libsimba 1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// Shared with other readers; waits while a live writer's intent is there.
    Read,
    /// Exclusive; while it waits, its intent holds new readers back.
    Write,
}

impl LockMode {
    /// The C value.
    pub fn raw(self) -> i32 {
        match self {
            LockMode::Read => sys::SIMBA_LOCK_READ,
            LockMode::Write => sys::SIMBA_LOCK_WRITE,
        }
    }
}

impl RevokeReason {
    /// The reason of a raw `simba_revoke_reason_t`; `None` for `SIMBA_REVOKE_NONE`.
    pub fn from_raw(r: sys::simba_revoke_reason_t) -> Option<RevokeReason> {
        (r != sys::SIMBA_REVOKE_NONE).then(|| RevokeReason::of(r))
    }
}

/// One period during which this node owns a lease: name, fencing token,
/// validity from this process's monotonic clock, and exactly one revocation.
///
/// A `Term` is a counted reference: `Clone` retains, `Drop` releases. Dropping
/// a reference of an election's term never revokes it. Accessors never block
/// and take no lock; all of them may be called from any thread.
///
/// ```
/// # use std::time::Duration;
/// let client = simba::Client::open("memory://doc-term")?;
/// let lock = client.lock("doc.term", Duration::from_secs(5))?;
/// let term: simba::Term = lock.term().clone();
/// assert_eq!(term.name(), "doc.term");
/// assert!(term.token() > 0);
/// assert!(term.is_valid());
/// term.ensure_valid(Duration::from_millis(100))?;
/// lock.unlock()?;
/// assert!(!term.is_valid());
/// assert_eq!(term.revoke_reason(), Some(simba::RevokeReason::Stopped));
/// assert_eq!(term.remaining(), Duration::ZERO);
/// # Ok::<(), simba::Error>(())
/// ```
pub struct Term {
    raw: *mut sys::simba_term_t,
}

// SAFETY: terms are reference counted with atomic counts, and every accessor
// of the ABI may be called from any thread.
unsafe impl Send for Term {}
unsafe impl Sync for Term {}

impl Term {
    /// Takes ownership of one reference.
    pub(crate) unsafe fn from_owned(raw: *mut sys::simba_term_t) -> Term {
        Term { raw }
    }

    /// A view of a term borrowed for a callback (never released by us).
    pub(crate) unsafe fn borrowed(raw: *mut sys::simba_term_t) -> ManuallyDrop<Term> {
        ManuallyDrop::new(Term { raw })
    }

    /// The raw handle (borrowed: do not release it).
    pub fn as_raw(&self) -> *mut sys::simba_term_t {
        self.raw
    }

    /// The lease name.
    pub fn name(&self) -> &str {
        // The name is borrowed for the life of the term; lease names are ASCII.
        unsafe { CStr::from_ptr(sys::simba_term_name(self.raw)) }.to_str().unwrap_or("")
    }

    /// The fencing token, constant within the term: > 0 and strictly
    /// increasing across terms of the name (a semaphore's across all its
    /// permits). A read lock's is the name's write epoch when it was granted
    /// (the last writer's token, 0 before any), shared by readers
    /// (docs/fencing.md). Pass it with every write to the resource.
    pub fn token(&self) -> u64 {
        unsafe { sys::simba_term_token(self.raw) }
    }

    /// What the term is a term of (libsimba 1.5).
    pub fn kind(&self) -> TermKind {
        TermKind::of(unsafe { sys::simba_term_kind(self.raw) })
    }

    /// Not revoked and the session's local deadline has not passed.
    pub fn is_valid(&self) -> bool {
        unsafe { sys::simba_term_is_valid(self.raw) != 0 }
    }

    /// Time left before the local deadline; `Duration::ZERO` once the term ended.
    pub fn remaining(&self) -> Duration {
        ms_duration(unsafe { sys::simba_term_remaining_ms(self.raw) })
    }

    /// Succeeds only if the term stays valid for more than `min_remaining`
    /// (`ErrorKind::Expired` otherwise). Call it before each step of leader work.
    pub fn ensure_valid(&self, min_remaining: Duration) -> Result<()> {
        check(unsafe { sys::simba_term_ensure_valid(self.raw, span_ms(min_remaining)) })
    }

    /// Why the term ended; `None` until it is revoked.
    pub fn revoke_reason(&self) -> Option<RevokeReason> {
        RevokeReason::from_raw(unsafe { sys::simba_term_revoke_reason(self.raw) })
    }

    /// Sleeps until the term is revoked or stops being valid, at most `timeout`
    /// (`Duration::MAX`: without bound): an interruptible sleep for leader work.
    /// Returns `true` once revoked, `false` when the timeout passed first.
    pub fn wait_revoked(&self, timeout: Duration) -> Result<bool> {
        match unsafe { sys::simba_term_wait_revoked(self.raw, wait_ms(timeout)) } {
            sys::SIMBA_OK => Ok(true),
            sys::SIMBA_ETIMEDOUT => Ok(false),
            rc => Err(Error::last(rc)),
        }
    }

    /// A file descriptor that becomes (and stays) readable once the term is
    /// revoked, for a poll loop. Owned by the term.
    pub fn revoke_fd(&self) -> Result<BorrowedFd<'_>> {
        let fd: RawFd = unsafe { sys::simba_term_revoke_fd(self.raw) };
        if fd < 0 {
            return Err(Error::last(sys::SIMBA_ENOMEM));
        }
        // SAFETY: the fd lives as long as the term, which outlives the borrow.
        Ok(unsafe { BorrowedFd::borrow_raw(fd) })
    }

    /// The `revoked` stage as a `Future` (any executor): resolves to the
    /// reason once the term is revoked. Leader work written as async code
    /// races its steps against it.
    pub fn revoked(&self) -> Result<Revoked> {
        let shot = OneShot::new();
        let put = shot.clone();
        if let Err(e) = self.on_revoked(move |_, r| put.put(r)) {
            // Already revoked with its client closed: the reason is final.
            match (e.kind(), self.revoke_reason()) {
                (crate::ErrorKind::Closed, Some(r)) => shot.put(r),
                _ => return Err(e),
            }
        }
        Ok(Revoked { shot })
    }

    /// The `revoked` stage: `f` runs exactly once, when the term is revoked
    /// (soon, never inside this call, if it already was), on the callback
    /// executor, in order with the term's election callbacks.
    ///
    /// Fails with `Closed` when the term was already revoked and its client is
    /// closed (read [`Term::revoke_reason`] instead); `f` is then dropped unrun.
    pub fn on_revoked<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(&Term, RevokeReason) + Send + 'static,
    {
        type Cb = Box<dyn FnOnce(&Term, RevokeReason) + Send>;
        unsafe extern "C" fn tramp(ud: *mut c_void, t: *mut sys::simba_term_t, reason: sys::simba_revoke_reason_t) {
            let f = Box::from_raw(ud as *mut Cb);
            run_callback("on_revoked", move || {
                let term = Term::borrowed(t);
                f(&term, RevokeReason::of(reason));
            });
        }
        let ud = Box::into_raw(Box::new(Box::new(f) as Cb));
        let rc = unsafe { sys::simba_term_on_revoked(self.raw, Some(tramp), ud as *mut c_void) };
        if rc != sys::SIMBA_OK {
            let e = Error::last(rc);
            drop(unsafe { Box::from_raw(ud) });
            return Err(e);
        }
        Ok(())
    }
}

/// The revocation of a term as a `Future` ([`Term::revoked`]).
#[must_use = "a Revoked does nothing unless awaited"]
pub struct Revoked {
    shot: std::sync::Arc<OneShot<RevokeReason>>,
}

impl std::future::Future for Revoked {
    type Output = RevokeReason;
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<RevokeReason> {
        // The reason is kept for a later poll: put it back after taking it.
        match self.shot.poll_take(cx) {
            std::task::Poll::Ready(r) => {
                self.shot.put(r);
                std::task::Poll::Ready(r)
            }
            p => p,
        }
    }
}

impl std::fmt::Debug for Revoked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revoked").finish_non_exhaustive()
    }
}

impl Term {
    /// Drops this reference without waiting, from anywhere
    /// (`simba_term_close_async`, libsimba 1.4). For an election's term (or a
    /// lock term already released) the completion is done after the callbacks
    /// already queued for the term; it never revokes it. The completion is
    /// done exactly once.
    pub fn close_async(self) -> Completion {
        let raw = ManuallyDrop::new(self).raw;
        term_close_async(raw)
    }
}

/// `simba_term_close_async` of one reference; done once it ran.
fn term_close_async(raw: *mut sys::simba_term_t) -> Completion {
    match with_completion(|done, ud| unsafe { sys::simba_term_close_async(raw, done, ud) }) {
        Ok(c) => c,
        Err(e) => {
            // Not started (out of memory): drop the reference as before.
            unsafe { sys::simba_term_release(raw) };
            let c = Completion::new();
            c.complete(Err(e));
            c
        }
    }
}

impl Clone for Term {
    fn clone(&self) -> Term {
        unsafe { sys::simba_term_retain(self.raw) };
        Term { raw: self.raw }
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        unsafe { sys::simba_term_release(self.raw) };
    }
}

/// Two `Term`s are equal when they are references to the same term.
impl PartialEq for Term {
    fn eq(&self, other: &Term) -> bool {
        self.raw == other.raw
    }
}
impl Eq for Term {}
impl std::hash::Hash for Term {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.raw.hash(h)
    }
}

impl std::fmt::Debug for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Term")
            .field("name", &self.name())
            .field("token", &self.token())
            .field("valid", &self.is_valid())
            .field("remaining", &self.remaining())
            .field("revoke_reason", &self.revoke_reason())
            .finish()
    }
}

/// A held lock, or a held permit of a semaphore or read/write lock
/// (`term().kind()` says which): a [`Term`] owned by the caller. Dereferences
/// to its term.
///
/// `unlock()` (or dropping it) revokes the term (`Stopped`) and releases the
/// lease with its token; outside callbacks it waits for the backend's answer
/// (at most one renew period), so the name is free when it returns.
///
/// ```
/// # use std::time::Duration;
/// let client = simba::Client::open("memory://doc-lock")?;
/// {
///     let held = client.lock("doc.lock", Duration::from_secs(5))?;
///     assert!(held.is_valid());
///     // Busy for anyone else until the guard goes.
///     assert_eq!(client.try_lock("doc.lock").unwrap_err().kind(), simba::ErrorKind::Busy);
/// }
/// let again = client.try_lock("doc.lock")?;
/// again.unlock()?;
/// # Ok::<(), simba::Error>(())
/// ```
pub struct LockTerm {
    term: ManuallyDrop<Term>,
}

impl LockTerm {
    pub(crate) unsafe fn from_owned(raw: *mut sys::simba_term_t) -> LockTerm {
        LockTerm { term: ManuallyDrop::new(Term::from_owned(raw)) }
    }

    /// The lock's term (clone it to keep it past the unlock).
    pub fn term(&self) -> &Term {
        &self.term
    }

    /// Releases the lock (see the type's documentation).
    pub fn unlock(self) -> Result<()> {
        let raw = self.term.raw;
        std::mem::forget(self);
        check(unsafe { sys::simba_lock_release(raw) })
    }

    /// Releases the lock without waiting, from anywhere, callbacks included
    /// (`simba_term_close_async`, libsimba 1.4): the term is revoked
    /// (`Stopped`) and the lease released with its token. The completion is
    /// done exactly once, after the backend answered the release (or, when it
    /// failed, once it is being retried in the background) and every
    /// `on_revoked` callback of the term ran. Clones of the term stay readable.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let client = simba::Client::open("memory://doc-lock-close")?;
    /// let held = client.lock("doc.lock.close", Duration::from_secs(5))?;
    /// held.close_async().wait(Duration::from_secs(5))?;
    /// client.try_lock("doc.lock.close")?.unlock()?;
    /// # Ok::<(), simba::Error>(())
    /// ```
    pub fn close_async(self) -> Completion {
        let raw = self.term.raw;
        std::mem::forget(self);
        term_close_async(raw)
    }
}

impl std::ops::Deref for LockTerm {
    type Target = Term;
    fn deref(&self) -> &Term {
        &self.term
    }
}

impl Drop for LockTerm {
    fn drop(&mut self) {
        // Only fails for a non-lock term, which cannot be here.
        unsafe { sys::simba_lock_release(self.term.raw) };
    }
}

impl std::fmt::Debug for LockTerm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LockTerm").field(&*self.term).finish()
    }
}
