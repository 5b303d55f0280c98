use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use simba_sys as sys;

use crate::error::{check, lease_cstring, Result};
use crate::shared::{Handle, Kind, Shared};
use crate::term::{RevokeReason, Term};
use crate::util::{lock, run_callback, span_ms, wait_ms, Completion};

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
        lock(&l.listener).on_revoked(&term, RevokeReason::of(reason));
    });
}

/// Contention for one name ([`Client::election`](crate::Client::election)).
///
/// Dropping it stops it: outside callbacks the drop waits until the stop
/// completed (term revoked and released) and no callback of it runs, then
/// frees the listener. Dropped inside a callback or leader work, it is closed
/// as [`Election::close_async`] does (the listener hears nothing more; it is
/// freed once the election's last callback ran); a [`Completion`] of a stop or
/// step-down asked for before still completes.
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
    h: Handle<ListenerBox>,
}

static ELECTION: Kind = Kind {
    what: "election",
    close_async: |raw, done, ud| unsafe { sys::simba_election_close_async(raw.cast(), done, ud) },
    free: |raw| unsafe { sys::simba_election_free(raw.cast()) },
};

impl Election {
    pub(crate) fn start(
        client: *mut sys::simba_client_t,
        shared: &Arc<Shared>,
        name: &str,
        l: Box<dyn Listener>,
    ) -> Result<Election> {
        let n = lease_cstring(name)?;
        let ud = ListenerBox { listener: Mutex::new(l), current: Mutex::new(None) };
        let h = Handle::start(shared, &ELECTION, ud, |ud| {
            let cl = sys::simba_listener_t { on_elected: Some(elected_tramp), on_revoked: Some(revoked_tramp), ud };
            let mut raw = std::ptr::null_mut();
            let rc = unsafe { sys::simba_election_start(&mut raw, client, n.as_ptr(), &cl) };
            (rc, raw.cast())
        })?;
        Ok(Election { h })
    }

    /// The raw handle (do not free it).
    pub fn as_raw(&self) -> *mut sys::simba_election_t {
        self.h.raw().cast()
    }

    /// The term this election holds, if it was elected and the term is still
    /// valid (set before `on_elected` runs, cleared before `on_revoked`).
    pub fn term(&self) -> Option<Term> {
        lock(&self.h.ud().current).as_ref().filter(|t| t.is_valid()).cloned()
    }

    /// Whether this node leads now: [`Election::term`] is some valid term.
    pub fn is_leader(&self) -> bool {
        self.term().is_some()
    }

    /// Stops the election: revokes the term (`Stopped`), releases the lease,
    /// delivers `on_revoked`; the completion is done after that, and the
    /// listener then receives nothing more. `State` when already stopping or stopped.
    pub fn stop(&self) -> Result<Completion> {
        self.h.call(|done, ud| unsafe { sys::simba_election_stop(self.as_raw(), done, ud) })
    }

    /// Blocking stop; stopping an election already stopping waits for that
    /// stop. `TimedOut` (the stop goes on); `WouldBlock` from a callback.
    pub fn stop_wait(&self, timeout: Duration) -> Result<()> {
        check(unsafe { sys::simba_election_stop_wait(self.as_raw(), wait_ms(timeout)) })
    }

    /// Steps down: revokes the term (`SteppedDown`), releases it, and does not
    /// contend for `cooldown` from now; the election stays started.
    pub fn step_down(&self, cooldown: Duration) -> Result<Completion> {
        self.h.call(|done, ud| unsafe { sys::simba_election_step_down(self.as_raw(), span_ms(cooldown), done, ud) })
    }

    /// Closes the election without waiting, from anywhere, its own callbacks
    /// included (`simba_election_close_async`, libsimba 1.4): stops it unless a
    /// stop was asked for; the listener is detached at once (no callback of it
    /// starts after this returns, not even the `on_revoked` of the term this
    /// stops; `Term::on_revoked` callbacks do run). The completion is done
    /// exactly once, after the stop completed (the name released), the
    /// completions of an earlier stop or step-down, and the election's last
    /// callback, with the listener dropped.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let client = simba::Client::open("memory://doc-election-close")?;
    /// let election = client.election("doc.close", simba::listener(|_t| {}, |_t, _r| {}))?;
    /// election.close_async().wait(Duration::from_secs(5))?;
    /// # Ok::<(), simba::Error>(())
    /// ```
    pub fn close_async(self) -> Completion {
        self.h.close_async()
    }
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election").finish_non_exhaustive()
    }
}
