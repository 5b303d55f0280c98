//! Safe Rust API for libsimba: distributed leases, locks and leader election
//! on Redis, PostgreSQL, ZooKeeper and `memory://`, over the C ABI of
//! `include/simba.h` (through the `simba-sys` crate).
//!
//! - [`Client`]: one session on one backend (THREAD mode); [`ExternalClient`]
//!   for a host's poll loop (`!Send`, `AsRawFd`).
//! - Locks: [`Client::lock`], [`Client::try_lock`], [`Client::lock_async`] give a
//!   [`LockTerm`], released by [`LockTerm::unlock`] or on drop.
//! - Elections: [`Client::election`] with a [`Listener`]; leader work:
//!   [`Client::run_while_leader`], [`Client::schedule`], [`Client::join_group`].
//! - [`Term`]: name, fencing token, validity, revocation.
//! - Observing: [`Client::observe`] (who holds a name), [`Client::metrics_text`],
//!   [`Client::snapshot_json`], [`Client::inspect_json`], session events.
//! - Futures without a runtime: [`Client::lock_future`], [`Term::revoked`],
//!   and [`Completion`] (stop, step-down) can be awaited on any executor.
//!
//! Every handle frees its closures only once no callback can run them; every
//! callback runs under `catch_unwind` (a panic is reported on stderr and
//! contained). Timeouts are `Duration`s; `Duration::MAX` waits without bound.
//!
//! ```
//! use std::time::Duration;
//! let client = simba::Client::open("memory://doc-crate")?;
//! let lock = client.lock("report", Duration::from_secs(5))?;
//! // Pass the fencing token with every write to the protected resource.
//! println!("writing with token {}", lock.token());
//! lock.unlock()?;
//! # Ok::<(), simba::Error>(())
//! ```
#![warn(missing_docs)]

#[macro_use]
mod names;
mod client;
mod config;
mod election;
mod error;
mod event;
mod observe;
mod shared;
mod task;
mod term;
mod util;

pub use client::{backend_schema, Client, ExternalClient, LockFuture};
pub use config::{Config, Job, LogLevel};
pub use election::{listener, Election, FnListener, Listener};
pub use error::{check_lease_name, Error, ErrorKind, Result};
pub use event::{Event, EventKind, SessionStatus};
pub use observe::{Holder, Observation, Observer};
pub use task::Task;
pub use term::{LockMode, LockTerm, RevokeReason, Revoked, Term, TermKind};
pub use util::Completion;

/// The raw C ABI.
pub use simba_sys as sys;

/// Version of the loaded library as (major, minor, patch).
///
/// ```
/// let (major, minor, _) = simba::version();
/// assert_eq!(major, 1);
/// assert!(minor >= 3);
/// ```
pub fn version() -> (u32, u32, u32) {
    let v = unsafe { sys::simba_version() };
    (v >> 16, (v >> 8) & 0xff, v & 0xff)
}

/// Version of the loaded library as "major.minor.patch".
pub fn version_string() -> &'static str {
    unsafe { std::ffi::CStr::from_ptr(sys::simba_version_string()) }.to_str().unwrap_or("")
}

/// The README's program, compiled as a doc test (not run: it needs a Redis).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
