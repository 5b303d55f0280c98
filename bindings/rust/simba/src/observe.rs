//! Following who holds a name without contending for it (`simba_observe_start`).
use std::ffi::{c_char, c_void, CStr};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use simba_sys as sys;

use crate::error::{lease_cstring, Result};
use crate::shared::{Handle, Kind, Shared};
use crate::util::{lock, run_callback, span_ms, Completion};

/// The holder of an observed name, as an observer reports it: history by the
/// time it arrives (for dashboards and routing, never for deciding who writes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Holder {
    /// The observed name.
    pub name: String,
    /// The holding session's id; `None` when the name is free.
    pub session: Option<String>,
    /// The holder's `client.name`, when known.
    pub client: Option<String>,
    /// The holder's fencing token; when free, the last one granted (0 if never).
    pub token: u64,
}

impl Holder {
    /// Whether nobody holds the name.
    pub fn is_free(&self) -> bool {
        self.session.is_none()
    }
}

type ObserveFn = Mutex<Box<dyn FnMut(&Holder) + Send>>;

unsafe fn opt(p: *const c_char) -> Option<String> {
    (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
}

unsafe extern "C" fn observe_tramp(
    ud: *mut c_void,
    name: *const c_char,
    session: *const c_char,
    client: *const c_char,
    token: u64,
) {
    let f = &*(ud as *const ObserveFn);
    run_callback("observe", || {
        let h = Holder { name: opt(name).unwrap_or_default(), session: opt(session), client: opt(client), token };
        (lock(f))(&h);
    });
}

static OBSERVER: Kind = Kind {
    what: "observer",
    close_async: |raw, done, ud| unsafe { sys::simba_observer_close_async(raw.cast(), done, ud) },
    free: |raw| unsafe { sys::simba_observer_free(raw.cast()) },
};

/// An observer of a name's holder ([`Client::observe`](crate::Client::observe)).
/// Dropping it stops it: outside callbacks the drop waits until no call of its
/// closure runs; inside one, no further call starts and the closure is freed
/// once the running call returned ([`Observer::close_async`]). Closing the
/// client stops it too.
pub struct Observer {
    h: Handle<ObserveFn>,
}

impl Observer {
    pub(crate) fn start<F>(
        client: *mut sys::simba_client_t,
        shared: &Arc<Shared>,
        name: &str,
        poll: Duration,
        f: F,
    ) -> Result<Observer>
    where
        F: FnMut(&Holder) + Send + 'static,
    {
        let n = lease_cstring(name)?;
        let ud: ObserveFn = Mutex::new(Box::new(f));
        let h = Handle::start(shared, &OBSERVER, ud, |ud| {
            let mut raw = std::ptr::null_mut();
            let rc = unsafe {
                sys::simba_observe_start(&mut raw, client, n.as_ptr(), span_ms(poll), Some(observe_tramp), ud)
            };
            (rc, raw.cast())
        })?;
        Ok(Observer { h })
    }

    /// The raw handle (do not free it).
    pub fn as_raw(&self) -> *mut sys::simba_observer_t {
        self.h.raw().cast()
    }

    /// Stops observing (what dropping does).
    pub fn close(self) {
        drop(self);
    }

    /// Stops observing without waiting, from anywhere, its own closure
    /// included (`simba_observer_close_async`, libsimba 1.4): no call of the
    /// closure starts after this returns; the completion is done exactly once,
    /// after the call running on another thread (if any) returned, with the
    /// closure dropped.
    pub fn close_async(self) -> Completion {
        self.h.close_async()
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").finish_non_exhaustive()
    }
}

/// The changes of a name's holder as an iterator
/// ([`Client::observe_iter`](crate::Client::observe_iter)): `next()` blocks
/// until the next change; dropping it stops the observer.
pub struct Observation {
    rx: mpsc::Receiver<Holder>,
    observer: Observer,
}

impl Observation {
    pub(crate) fn start(
        client: *mut sys::simba_client_t,
        shared: &Arc<Shared>,
        name: &str,
        poll: Duration,
    ) -> Result<Observation> {
        let (tx, rx) = mpsc::channel();
        let observer = Observer::start(client, shared, name, poll, move |h| {
            let _ = tx.send(h.clone());
        })?;
        Ok(Observation { rx, observer })
    }

    /// The next change, waiting at most `timeout`; `None` if none came.
    pub fn next_timeout(&mut self, timeout: Duration) -> Option<Holder> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// The observer behind it.
    pub fn observer(&self) -> &Observer {
        &self.observer
    }
}

impl Iterator for Observation {
    type Item = Holder;
    /// Blocks until the next change (a closed client sends none: prefer
    /// [`Observation::next_timeout`] where that matters).
    fn next(&mut self) -> Option<Holder> {
        self.rx.recv().ok()
    }
}

impl std::fmt::Debug for Observation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observation").finish_non_exhaustive()
    }
}
