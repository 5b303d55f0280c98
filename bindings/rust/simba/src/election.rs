use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use simba_sys as sys;

use crate::client::{Client, Shared};
use crate::error::{check, cstring, Error, Result};
use crate::term::{RevokeReason, Term};
use crate::util::{in_callback, lock, run_callback, span_ms, wait_ms, with_completion, Completion};

/// An election listener. Its callbacks run one at a time, in order, on the
/// callback executor; each receives a borrowed term (clone it to keep it).
pub trait Listener: Send + 'static {
    /// This node won a term.
    fn on_elected(&mut self, term: &Term) {
        let _ = term;
    }
    /// The term ended; exactly one per `on_elected`.
    fn on_revoked(&mut self, term: &Term, reason: RevokeReason) {
        let _ = (term, reason);
    }
}

/// A [`Listener`] made of two closures (see [`listener`]).
pub struct FnListener<E, R> {
    elected: E,
    revoked: R,
}

impl<E, R> Listener for FnListener<E, R>
where
    E: FnMut(&Term) + Send + 'static,
    R: FnMut(&Term, RevokeReason) + Send + 'static,
{
    fn on_elected(&mut self, term: &Term) {
        (self.elected)(term)
    }
    fn on_revoked(&mut self, term: &Term, reason: RevokeReason) {
        (self.revoked)(term, reason)
    }
}

/// A listener from two closures: `on_elected(&term)` and `on_revoked(&term, reason)`.
pub fn listener<E, R>(on_elected: E, on_revoked: R) -> FnListener<E, R>
where
    E: FnMut(&Term) + Send + 'static,
    R: FnMut(&Term, RevokeReason) + Send + 'static,
{
    FnListener { elected: on_elected, revoked: on_revoked }
}

/// The user data of an election: its listener and the term it holds now.
struct ListenerBox {
    listener: Mutex<Box<dyn Listener>>,
    current: Mutex<Option<Term>>,
}

unsafe extern "C" fn elected_tramp(ud: *mut c_void, t: *mut sys::simba_term_t) {
    let l = &*(ud as *const ListenerBox);
    run_callback("on_elected", || {
        let term = Term::borrowed(t);
        *lock(&l.current) = Some((*term).clone());
        lock(&l.listener).on_elected(&term);
    });
}

unsafe extern "C" fn revoked_tramp(ud: *mut c_void, t: *mut sys::simba_term_t, reason: sys::simba_revoke_reason_t) {
    let l = &*(ud as *const ListenerBox);
    run_callback("on_revoked", || {
        let term = Term::borrowed(t);
        let old = {
            let mut cur = lock(&l.current);
            if cur.as_ref().is_some_and(|c| c.as_raw() == term.as_raw()) {
                cur.take()
            } else {
                None
            }
        };
        drop(old);
        lock(&l.listener).on_revoked(&term, RevokeReason::from_raw(reason).unwrap_or(RevokeReason::Stopped));
    });
}

/// Contention for one name ([`Client::election`]).
///
/// Dropping it stops it: outside callbacks the drop waits until the stop
/// completed (term revoked and released) and no callback of it runs, then
/// frees the listener. Dropped inside a callback or leader work, it stops
/// without waiting and the listener is freed once its last callback ran (at
/// the latest when the client is closed); a [`Completion`] of it still pending
/// then that the library will no longer report completes with `Canceled`.
///
/// ```
/// use std::sync::mpsc;
/// use std::time::Duration;
/// let client = simba::Client::open("memory://doc-election")?;
/// let (tx, rx) = mpsc::channel();
/// let election = client.election("doc.leader", simba::listener(
///     move |term| tx.send(term.token()).unwrap(),
///     |_term, reason| println!("revoked: {reason:?}"),
/// ))?;
/// let token = rx.recv_timeout(Duration::from_secs(5)).unwrap();
/// assert!(token > 0);
/// election.stop_wait(Duration::from_secs(5))?;
/// # Ok::<(), simba::Error>(())
/// ```
pub struct Election {
    raw: *mut sys::simba_election_t,
    listener: *mut ListenerBox,
    client: Arc<Shared>,
    /// Completions of stops and step-downs not known to be done.
    pending: Mutex<Vec<Completion>>,
}

// SAFETY: every election function may be called from any thread; the listener
// is behind a mutex and `Send`.
unsafe impl Send for Election {}
unsafe impl Sync for Election {}

impl Election {
    pub(crate) fn start(client: &Client, name: &str, l: Box<dyn Listener>) -> Result<Election> {
        let n = cstring(name, "lease name")?;
        let boxed: *mut ListenerBox =
            Box::into_raw(Box::new(ListenerBox { listener: Mutex::new(l), current: Mutex::new(None) }));
        let cl = sys::simba_listener_t {
            on_elected: Some(elected_tramp),
            on_revoked: Some(revoked_tramp),
            ud: boxed as *mut c_void,
        };
        let mut raw = std::ptr::null_mut();
        let rc = unsafe { sys::simba_election_start(&mut raw, client.as_raw(), n.as_ptr(), &cl) };
        if rc != sys::SIMBA_OK {
            let e = Error::last(rc);
            drop(unsafe { Box::from_raw(boxed) });
            return Err(e);
        }
        Ok(Election { raw, listener: boxed, client: client.shared().clone(), pending: Mutex::new(Vec::new()) })
    }

    /// The raw handle (do not free it).
    pub fn as_raw(&self) -> *mut sys::simba_election_t {
        self.raw
    }

    /// The term this election holds, if it was elected and the term is still
    /// valid (set before `on_elected` runs, cleared before `on_revoked`).
    pub fn term(&self) -> Option<Term> {
        // SAFETY: the box lives as long as the election handle.
        let l = unsafe { &*self.listener };
        lock(&l.current).as_ref().filter(|t| t.is_valid()).cloned()
    }

    /// Whether this node leads now: [`Election::term`] is some valid term.
    pub fn is_leader(&self) -> bool {
        self.term().is_some()
    }

    /// Stops the election: revokes the term (`Stopped`), releases the lease,
    /// delivers `on_revoked`; the completion is done after that, and the
    /// listener then receives nothing more. `State` when already stopping or stopped.
    pub fn stop(&self) -> Result<Completion> {
        self.track(with_completion(|done, ud| unsafe { sys::simba_election_stop(self.raw, done, ud) }))
    }

    fn track(&self, c: Result<Completion>) -> Result<Completion> {
        let c = c?;
        let mut p = lock(&self.pending);
        p.retain(|x| !x.is_done());
        p.push(c.clone());
        Ok(c)
    }

    /// Blocking stop; stopping an election already stopping waits for that
    /// stop. `TimedOut` (the stop goes on); `WouldBlock` from a callback.
    pub fn stop_wait(&self, timeout: Duration) -> Result<()> {
        check(unsafe { sys::simba_election_stop_wait(self.raw, wait_ms(timeout)) })
    }

    /// Steps down: revokes the term (`SteppedDown`), releases it, and does not
    /// contend for `cooldown` from now; the election stays started.
    pub fn step_down(&self, cooldown: Duration) -> Result<Completion> {
        self.track(with_completion(|done, ud| unsafe {
            sys::simba_election_step_down(self.raw, span_ms(cooldown), done, ud)
        }))
    }
}

/// What an election dropped inside a callback leaves for its stop's done.
struct Deferred {
    raw: *mut sys::simba_election_t,
    listener: *mut ListenerBox,
    _client: Arc<Shared>,
}

unsafe extern "C" fn deferred_free(ud: *mut c_void, _err: i32) {
    let d = Box::from_raw(ud as *mut Deferred);
    run_callback("election drop", move || {
        // Allowed inside the done, which is the election's last callback.
        sys::simba_election_free(d.raw);
        drop(Box::from_raw(d.listener));
    });
}

struct SendPtr(*mut ListenerBox);
// SAFETY: the listener is `Send`; the pointer is only turned back into its box.
unsafe impl Send for SendPtr {}
impl Drop for SendPtr {
    fn drop(&mut self) {
        drop(unsafe { Box::from_raw(self.0) });
    }
}

impl Drop for Election {
    fn drop(&mut self) {
        if !in_callback() {
            // Waits for the stop and for any running callback.
            unsafe { sys::simba_election_free(self.raw) };
            drop(unsafe { Box::from_raw(self.listener) });
            return;
        }
        let d =
            Box::into_raw(Box::new(Deferred { raw: self.raw, listener: self.listener, _client: self.client.clone() }));
        let rc = unsafe { sys::simba_election_stop(self.raw, Some(deferred_free), d as *mut c_void) };
        if rc != sys::SIMBA_OK {
            // Already stopping or stopped: free the handle now (it returns at
            // once here) and keep the listener until the client is gone.
            drop(unsafe { Box::from_raw(d) });
            unsafe { sys::simba_election_free(self.raw) };
            self.client.retire(Box::new(SendPtr(self.listener)));
            // A handle freed inside a callback runs no done afterwards: settle
            // the completions still pending so that nobody waits for them.
            for c in lock(&self.pending).drain(..) {
                c.complete(Err(Error::with_message(
                    sys::SIMBA_ECANCELED,
                    "the election was dropped inside a callback before this completed".into(),
                )));
            }
        }
    }
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election").finish_non_exhaustive()
    }
}
