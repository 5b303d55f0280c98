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

/// The Rust side of a client's logger, executor and event sinks.
pub(crate) struct Shared {
    _hooks: Hooks,
    sink: Mutex<SinkSlot>,
}

impl Shared {
    pub(crate) fn new(hooks: Hooks) -> Arc<Shared> {
        Arc::new(Shared { _hooks: hooks, sink: Mutex::new(SinkSlot::default()) })
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

/// How one kind of C handle is closed: without waiting (the one close shape
/// of 1.4, whose done is the handle's last callback) or, outside callbacks,
/// by its older free, which waits.
pub(crate) struct Kind {
    pub(crate) what: &'static str,
    /// `X_close_async` (SIMBA_1.4): callable anywhere, never blocks.
    pub(crate) close_async: unsafe fn(*mut c_void, sys::simba_done_fn, *mut c_void) -> c_int,
    /// Outside callbacks: stops, and waits for the stop and running callbacks.
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
/// callbacks), then `U`. Closed with [`Handle::close_async`], or dropped
/// inside a callback (where that wait would wait for itself), it is closed
/// with its `X_close_async`, and `U` is freed in that close's done, the
/// handle's last callback (docs/bindings-contract.md).
pub(crate) struct Handle<U: Send + 'static> {
    /// Null once closed with `close_async`.
    raw: *mut c_void,
    ud: *mut U,
    kind: &'static Kind,
    shared: Arc<Shared>,
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
        Ok(Handle { raw, ud, kind, shared: shared.clone() })
    }

    pub(crate) fn raw(&self) -> *mut c_void {
        self.raw
    }

    /// The user data (lives as long as the handle).
    pub(crate) fn ud(&self) -> &U {
        unsafe { &*self.ud }
    }

    /// Starts an asynchronous stop or step-down. Its done runs even when the
    /// handle is closed meanwhile (before the close's done).
    pub(crate) fn call(&self, start: impl FnOnce(sys::simba_done_fn, *mut c_void) -> c_int) -> Result<Completion> {
        with_completion(start)
    }

    /// Closes the handle without waiting: the completion is done once the
    /// handle's last callback ran and its user data was dropped.
    pub(crate) fn close_async(mut self) -> Completion {
        let c = Completion::new();
        self.start_close(Some(c.clone()));
        c
    }

    fn start_close(&mut self, then: Option<Completion>) {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        let closing = Box::into_raw(Box::new(Closing {
            ud: UserData(self.ud),
            then,
            what: self.kind.what,
            _client: self.shared.clone(),
        }));
        let rc = unsafe { (self.kind.close_async)(raw, Some(closed::<U>), closing as *mut c_void) };
        if rc != sys::SIMBA_OK {
            // Not started (out of memory): free the handle the old way, and
            // leak the user data, which its callbacks may still reach.
            let e = Error::last(rc);
            let c = unsafe { Box::from_raw(closing) };
            unsafe { (self.kind.free)(raw) };
            let Closing { ud, then, .. } = *c;
            std::mem::forget(ud);
            if let Some(t) = then {
                t.complete(Err(e));
            }
        }
    }
}

/// The done of a handle's close: its last callback.
struct Closing<U> {
    ud: UserData<U>,
    then: Option<Completion>,
    what: &'static str,
    /// Keeps the client's sinks alive as long as the handle.
    _client: Arc<Shared>,
}

unsafe extern "C" fn closed<U: Send + 'static>(ud: *mut c_void, err: c_int) {
    let c = Box::from_raw(ud as *mut Closing<U>);
    run_callback(c.what, move || {
        let Closing { ud, then, _client, .. } = *c;
        drop(ud); // no callback of the handle runs any more
        if let Some(t) = then {
            t.complete(crate::error::check_async(err));
        }
    });
}

impl<U: Send + 'static> Drop for Handle<U> {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return; // closed with close_async: its done frees the user data
        }
        if in_callback() {
            self.start_close(None);
            return;
        }
        let ud = UserData(self.ud);
        unsafe { (self.kind.free)(self.raw) };
        drop(ud); // after the wait
    }
}
