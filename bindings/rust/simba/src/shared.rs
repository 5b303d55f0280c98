//! What must outlive a client's callbacks ([`Shared`]), and the one way a
//! handle whose callbacks run Rust closures (election, task, observer) is
//! stopped and freed ([`Handle`]).
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex};

use simba_sys as sys;

use crate::config::Hooks;
use crate::error::{Error, Result};
use crate::event::{Event, Sink};
use crate::util::{in_callback, lock, run_callback, with_completion, Completion};

#[derive(Default)]
pub(crate) struct SinkSlot {
    generation: u64,
    sink: Option<Sink>,
    registered: bool,
}

/// The Rust side of a client's logger, executor and event sinks, and the
/// closures of handles dropped where their callbacks could still run (freed
/// with this, once the client is closed and every handle dropped).
pub(crate) struct Shared {
    _hooks: Hooks,
    sink: Mutex<SinkSlot>,
    graveyard: Mutex<Vec<Box<dyn Send>>>,
}

impl Shared {
    pub(crate) fn new(hooks: Hooks) -> Arc<Shared> {
        Arc::new(Shared { _hooks: hooks, sink: Mutex::new(SinkSlot::default()), graveyard: Mutex::new(Vec::new()) })
    }

    /// Keeps `b` until the client is closed and every handle dropped.
    fn retire(&self, b: Box<dyn Send>) {
        lock(&self.graveyard).push(b);
    }

    /// Replaces the client's event sink (`None` stops delivery, also of a
    /// config's sink); callable from inside the sink.
    pub(crate) fn set_sink(self: &Arc<Shared>, client: *mut sys::simba_client_t, sink: Option<Sink>) -> Result<()> {
        let mut s = lock(&self.sink);
        if !s.registered {
            crate::error::check(unsafe {
                sys::simba_client_on_event(client, Some(event_tramp), Arc::as_ptr(self) as *mut c_void)
            })?;
            s.registered = true;
        }
        s.generation += 1;
        let old = std::mem::replace(&mut s.sink, sink);
        drop(s);
        drop(old);
        Ok(())
    }
}

unsafe extern "C" fn event_tramp(ud: *mut c_void, kind: sys::simba_event_type_t, detail: *const c_char) {
    let shared = &*(ud as *const Shared);
    run_callback("event", || {
        let ev = Event::from_c(kind, detail);
        // Take the sink out so that it may replace itself without a deadlock.
        let (gen, sink) = {
            let mut s = lock(&shared.sink);
            (s.generation, s.sink.take())
        };
        if let Some(mut f) = sink {
            struct PutBack<'a>(&'a Shared, u64, Option<Sink>);
            impl Drop for PutBack<'_> {
                fn drop(&mut self) {
                    let mut s = lock(&self.0.sink);
                    if s.generation == self.1 && s.sink.is_none() {
                        s.sink = self.2.take();
                    }
                }
            }
            let mut guard = PutBack(shared, gen, None);
            f(&ev);
            guard.2 = Some(f);
        }
    });
}

/// How one kind of C handle is stopped (with a done) and freed.
pub(crate) struct Kind {
    pub(crate) what: &'static str,
    /// `None`: the handle has no stop with a done (an observer).
    pub(crate) stop: Option<unsafe fn(*mut c_void, sys::simba_done_fn, *mut c_void) -> c_int>,
    /// Outside callbacks: stops, and waits for the stop and running callbacks.
    /// Inside: frees without waiting.
    pub(crate) free: unsafe fn(*mut c_void),
}

/// The user data of a handle, owned as a box.
struct UserData<U>(*mut U);
// SAFETY: only turned back into its box; U is Send.
unsafe impl<U: Send> Send for UserData<U> {}
impl<U> Drop for UserData<U> {
    fn drop(&mut self) {
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// A C handle whose callbacks get `*mut U` as user data. Dropped outside
/// callbacks it frees the handle (which waits for the stop and for running
/// callbacks), then `U`. Dropped inside a callback, where that wait would wait
/// for itself, it stops the handle and frees both from the stop's done (its
/// last callback); if no such done can come (a stop already under way, or a
/// handle without one), it frees the handle at once and keeps `U` until the
/// client is gone.
pub(crate) struct Handle<U: Send + 'static> {
    raw: *mut c_void,
    ud: *mut U,
    kind: &'static Kind,
    shared: Arc<Shared>,
    /// Completions of stops and step-downs not known to be done.
    pending: Mutex<Vec<Completion>>,
}

// SAFETY: the ABI lets every handle function be called from any thread; U is
// Send and reached only through shared references guarded by its own locks.
unsafe impl<U: Send + Sync + 'static> Send for Handle<U> {}
unsafe impl<U: Send + Sync + 'static> Sync for Handle<U> {}

impl<U: Send + 'static> Handle<U> {
    /// Starts a handle: `start(ud)` returns the C call's code and handle.
    pub(crate) fn start(
        shared: &Arc<Shared>,
        kind: &'static Kind,
        ud: U,
        start: impl FnOnce(*mut c_void) -> (c_int, *mut c_void),
    ) -> Result<Handle<U>> {
        let ud = Box::into_raw(Box::new(ud));
        let (rc, raw) = start(ud as *mut c_void);
        if rc != sys::SIMBA_OK {
            let e = Error::last(rc);
            drop(UserData(ud));
            return Err(e);
        }
        Ok(Handle { raw, ud, kind, shared: shared.clone(), pending: Mutex::new(Vec::new()) })
    }

    pub(crate) fn raw(&self) -> *mut c_void {
        self.raw
    }

    /// The user data (lives as long as the handle).
    pub(crate) fn ud(&self) -> &U {
        unsafe { &*self.ud }
    }

    /// Starts an asynchronous stop or step-down; its completion is settled
    /// with `Canceled` should the handle be dropped where its done cannot come.
    pub(crate) fn call(&self, start: impl FnOnce(sys::simba_done_fn, *mut c_void) -> c_int) -> Result<Completion> {
        let c = with_completion(start)?;
        let mut p = lock(&self.pending);
        p.retain(|x| !x.is_done());
        p.push(c.clone());
        Ok(c)
    }
}

struct Deferred<U> {
    raw: *mut c_void,
    free: unsafe fn(*mut c_void),
    what: &'static str,
    ud: UserData<U>,
    _client: Arc<Shared>,
}

unsafe extern "C" fn deferred_free<U: Send + 'static>(ud: *mut c_void, _err: c_int) {
    let d = Box::from_raw(ud as *mut Deferred<U>);
    run_callback(d.what, move || {
        // Inside the stop's done, the handle's last callback: frees at once.
        (d.free)(d.raw);
        drop(d);
    });
}

impl<U: Send + 'static> Drop for Handle<U> {
    fn drop(&mut self) {
        let ud = UserData(self.ud);
        if !in_callback() {
            unsafe { (self.kind.free)(self.raw) };
            return; // `ud` freed here, after the wait
        }
        let ud = match self.kind.stop {
            None => ud,
            Some(stop) => {
                let d = Box::into_raw(Box::new(Deferred {
                    raw: self.raw,
                    free: self.kind.free,
                    what: self.kind.what,
                    ud,
                    _client: self.shared.clone(),
                }));
                if unsafe { stop(self.raw, Some(deferred_free::<U>), d as *mut c_void) } == sys::SIMBA_OK {
                    return;
                }
                unsafe { Box::from_raw(d) }.ud
            }
        };
        // No done will come: free the handle now (it returns at once here),
        // keep the closure until the client is gone, and settle the
        // completions the library will no longer report.
        unsafe { (self.kind.free)(self.raw) };
        self.shared.retire(Box::new(ud));
        for c in lock(&self.pending).drain(..) {
            c.complete(Err(Error::with_message(
                sys::SIMBA_ECANCELED,
                format!("the {} was dropped inside a callback before this completed", self.kind.what),
            )));
        }
    }
}
