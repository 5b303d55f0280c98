use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use simba_sys as sys;

use crate::error::{cstring, lease_cstring, Error, Result};
use crate::shared::{Handle, Kind, Shared};
use crate::term::Term;
use crate::util::{lock, run_callback, span_ms, Completion};

type WorkFn = Box<dyn Fn(&Term) + Send + Sync>;

/// The user data of a task: its work and the terms it leads now.
struct WorkBox {
    work: WorkFn,
    /// Terms seen by the work and not revoked yet (shared with their
    /// `on_revoked` callbacks, which may run after the task is closed).
    current: Arc<Mutex<Vec<Term>>>,
}

unsafe extern "C" fn work_tramp(ud: *mut c_void, t: *mut sys::simba_term_t) {
    let w = &*(ud as *const WorkBox);
    run_callback("leader work", || {
        let term = Term::borrowed(t);
        track(&w.current, &term);
        (w.work)(&term);
    });
}

/// Lists `term` in `current` until it is revoked (once per term: a schedule
/// runs its work many times on one term).
fn track(current: &Arc<Mutex<Vec<Term>>>, term: &Term) {
    let raw = term.as_raw();
    {
        let mut cur = lock(current);
        if cur.iter().any(|x| x.as_raw() == raw) {
            return;
        }
        cur.push(term.clone());
    }
    let untrack = {
        let current = current.clone();
        move |t: &Term| {
            let gone = {
                let mut cur = lock(&current);
                cur.iter().position(|x| x.as_raw() == t.as_raw()).map(|i| cur.swap_remove(i))
            };
            drop(gone);
        }
    };
    let untrack2 = untrack.clone();
    if term.on_revoked(move |t, _| untrack(t)).is_err() {
        // Already revoked and its client closed: nothing to track.
        untrack2(term);
    }
}

/// Leader work: an election whose terms run work on a thread of their own
/// ([`Client::run_while_leader`](crate::Client::run_while_leader),
/// [`Client::schedule`](crate::Client::schedule), [`Client::join_group`](crate::Client::join_group)).
///
/// Stop and step-down follow the handover order: the term is revoked (work
/// sees it), the engine waits until the work returned (or the term's deadline
/// passed), then releases the lease. Dropping the task (or [`Task::close`])
/// stops it and, outside callbacks and leader work, waits until every run of the
/// work returned; then the closure is freed. Inside them (or with
/// [`Task::close_async`]) it does not wait: the closure is freed in the
/// close's done.
///
/// ```
/// use std::sync::mpsc;
/// use std::time::Duration;
/// let client = simba::Client::open("memory://doc-task")?;
/// let (tx, rx) = mpsc::channel();
/// let task = client.run_while_leader("doc.work", move |term| {
///     tx.send(term.token()).unwrap();
///     // Leader work: sleep until revoked (stop, deadline, ...).
///     term.wait_revoked(Duration::MAX).unwrap();
/// })?;
/// assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap() > 0);
/// task.close()?; // revokes the term, waits for the work to return
/// # Ok::<(), simba::Error>(())
/// ```
pub struct Task {
    h: Handle<WorkBox>,
}

static TASK: Kind = Kind {
    what: "task",
    close_async: |raw, done, ud| unsafe { sys::simba_task_close_async(raw.cast(), done, ud) },
    free: |raw| unsafe {
        sys::simba_task_close(raw.cast());
    },
};

fn serial<F: FnMut(&Term) + Send + 'static>(f: F) -> WorkFn {
    let m = Mutex::new(f);
    Box::new(move |t: &Term| (lock(&m))(t))
}

/// The client a task starts on.
pub(crate) type On<'a> = (*mut sys::simba_client_t, &'a Arc<Shared>);

impl Task {
    fn create(
        (_, shared): On<'_>,
        work: WorkFn,
        start: impl FnOnce(*mut *mut sys::simba_task_t, sys::simba_work_fn, *mut c_void) -> i32,
    ) -> Result<Task> {
        let ud = WorkBox { work, current: Arc::default() };
        let h = Handle::start(shared, &TASK, ud, |ud| {
            let mut raw = std::ptr::null_mut();
            let rc = start(&mut raw, Some(work_tramp), ud);
            (rc, raw.cast())
        })?;
        Ok(Task { h })
    }

    pub(crate) fn run_while_leader<F>(on: On<'_>, name: &str, work: F) -> Result<Task>
    where
        F: FnMut(&Term) + Send + 'static,
    {
        let n = lease_cstring(name)?;
        Task::create(on, serial(work), |out, w, ud| unsafe {
            sys::simba_run_while_leader(out, on.0, n.as_ptr(), w, ud)
        })
    }

    pub(crate) fn schedule<F>(on: On<'_>, name: &str, initial: Duration, period: Duration, run: F) -> Result<Task>
    where
        F: FnMut(&Term) + Send + 'static,
    {
        let n = lease_cstring(name)?;
        if period.is_zero() {
            return Err(Error::with_message(sys::SIMBA_EINVAL, "schedule period must be > 0".into()));
        }
        Task::create(on, serial(run), |out, w, ud| unsafe {
            sys::simba_schedule(out, on.0, n.as_ptr(), span_ms(initial), span_ms(period), w, ud)
        })
    }

    pub(crate) fn join_group<F>(on: On<'_>, group: &str, partitions: u32, work: F) -> Result<Task>
    where
        F: Fn(&Term) + Send + Sync + 'static,
    {
        let g = cstring(group, "group name")?;
        Task::create(on, Box::new(work), |out, w, ud| unsafe {
            sys::simba_group_join(out, on.0, g.as_ptr(), partitions, w, ud)
        })
    }

    /// The raw handle (do not close it).
    pub fn as_raw(&self) -> *mut sys::simba_task_t {
        self.h.raw().cast()
    }

    /// The terms this task leads now: at most one for `run_while_leader` and
    /// `schedule`, one per partition led for a group (`term.name()` is the
    /// partition). A term is listed from the first run of its work until its
    /// revocation was delivered; one whose deadline passed may still be listed
    /// for a moment, so [`Task::is_leader`] also checks validity.
    pub fn terms(&self) -> Vec<Term> {
        let mut v: Vec<Term> = lock(&self.h.ud().current).clone();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }

    /// Whether this node leads: some term of [`Task::terms`] is valid.
    pub fn is_leader(&self) -> bool {
        self.terms().iter().any(Term::is_valid)
    }

    /// Stops the task: revokes the term (`Stopped`), waits for the work,
    /// releases the lease; then the completion is done. `State` when already
    /// stopping or stopped.
    pub fn stop(&self) -> Result<Completion> {
        self.h.call(|done, ud| unsafe { sys::simba_task_stop(self.as_raw(), done, ud) })
    }

    /// Steps down: revokes the term (`SteppedDown`), waits for the work,
    /// releases, and does not contend for `cooldown` from now. For a group:
    /// leaves it for the cooldown.
    pub fn step_down(&self, cooldown: Duration) -> Result<Completion> {
        self.h.call(|done, ud| unsafe { sys::simba_task_step_down(self.as_raw(), span_ms(cooldown), done, ud) })
    }

    /// Stops, waits for the stop and for every run of the work (outside
    /// callbacks and leader work), and frees the task. What dropping does.
    pub fn close(self) -> Result<()> {
        drop(self);
        Ok(())
    }

    /// Closes the task without waiting, from anywhere, its own leader work
    /// included (`simba_task_close_async`, libsimba 1.4): stops it in handover
    /// order unless a stop was asked for. The completion is done exactly once,
    /// after the stop completed, every run of the work returned (work that
    /// ignores its revocation delays it, never the handover), and the task's
    /// last callback, with the work closure dropped. For a group: once every
    /// partition was handed over and the member lock released. What dropping
    /// does inside a callback or leader work.
    pub fn close_async(self) -> Completion {
        self.h.close_async()
    }
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task").finish_non_exhaustive()
    }
}
