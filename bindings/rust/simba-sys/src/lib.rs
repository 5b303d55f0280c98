//! Raw declarations of libsimba's C ABI (`include/simba.h`, version 1.3).
//!
//! Hand-written, one item per item of the header; see the header for every
//! function's contract. Use the `simba` crate for a safe API.
#![allow(non_camel_case_types)]
#![no_std]

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::marker::{PhantomData, PhantomPinned};

pub const SIMBA_VERSION_MAJOR: c_uint = 1;
pub const SIMBA_VERSION_MINOR: c_uint = 4;
pub const SIMBA_VERSION_PATCH: c_uint = 0;

pub const SIMBA_OK: c_int = 0;
pub const SIMBA_EINVAL: c_int = -1;
pub const SIMBA_ESTATE: c_int = -2;
pub const SIMBA_EEXPIRED: c_int = -3;
pub const SIMBA_ETIMEDOUT: c_int = -4;
pub const SIMBA_EBACKEND: c_int = -5;
pub const SIMBA_ECLOSED: c_int = -6;
pub const SIMBA_ENOMEM: c_int = -7;
pub const SIMBA_EWOULDBLOCK: c_int = -8;
pub const SIMBA_EBUSY: c_int = -9;
pub const SIMBA_EUNSUPPORTED: c_int = -10;
pub const SIMBA_ECANCELED: c_int = -11;

/// `simba_lease_name_check`'s `len` for a NUL-terminated name.
pub const SIMBA_NAME_CSTRING: usize = usize::MAX;

pub const SIMBA_LOG_DEBUG: c_int = 0;
pub const SIMBA_LOG_INFO: c_int = 1;
pub const SIMBA_LOG_WARN: c_int = 2;
pub const SIMBA_LOG_ERROR: c_int = 3;

/// C enums are passed as `int` (their values are pinned by the header).
pub type simba_session_status_t = c_int;
pub const SIMBA_SESSION_OPENING: simba_session_status_t = 0;
pub const SIMBA_SESSION_LIVE: simba_session_status_t = 1;
pub const SIMBA_SESSION_SUSPENDED: simba_session_status_t = 2;
pub const SIMBA_SESSION_CLOSED: simba_session_status_t = 3;

pub type simba_event_type_t = c_int;
pub const SIMBA_EVENT_SESSION_OPENED: simba_event_type_t = 0;
pub const SIMBA_EVENT_SESSION_LIVE: simba_event_type_t = 1;
pub const SIMBA_EVENT_SESSION_SUSPENDED: simba_event_type_t = 2;
pub const SIMBA_EVENT_SESSION_EXPIRED: simba_event_type_t = 3;
pub const SIMBA_EVENT_SESSION_CLOSED: simba_event_type_t = 4;
pub const SIMBA_EVENT_SESSION_LEASE_SHORTENED: simba_event_type_t = 5;

pub type simba_revoke_reason_t = c_int;
pub const SIMBA_REVOKE_NONE: simba_revoke_reason_t = 0;
pub const SIMBA_REVOKE_STOPPED: simba_revoke_reason_t = 1;
pub const SIMBA_REVOKE_STEPPED_DOWN: simba_revoke_reason_t = 2;
pub const SIMBA_REVOKE_DEADLINE_PASSED: simba_revoke_reason_t = 3;
pub const SIMBA_REVOKE_SESSION_EXPIRED: simba_revoke_reason_t = 4;
pub const SIMBA_REVOKE_TAKEN_OVER: simba_revoke_reason_t = 5;

/// Since 1.5.
pub type simba_term_kind_t = c_int;
pub const SIMBA_TERM_ELECTION: simba_term_kind_t = 0;
pub const SIMBA_TERM_LOCK: simba_term_kind_t = 1;
pub const SIMBA_TERM_SEMAPHORE: simba_term_kind_t = 2;
pub const SIMBA_TERM_READ: simba_term_kind_t = 3;
pub const SIMBA_TERM_WRITE: simba_term_kind_t = 4;

/// Since 1.5: the `mode` of `simba_rwlock_*`.
pub type simba_lock_mode_t = c_int;
pub const SIMBA_LOCK_READ: simba_lock_mode_t = 1;
pub const SIMBA_LOCK_WRITE: simba_lock_mode_t = 2;

macro_rules! opaque {
    ($($name:ident),*) => {$(
        #[repr(C)]
        pub struct $name {
            _data: [u8; 0],
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}
opaque!(simba_config_t, simba_client_t, simba_term_t, simba_election_t, simba_task_t, simba_observer_t);

pub type simba_submit_fn = Option<
    unsafe extern "C" fn(ctx: *mut c_void, run: Option<unsafe extern "C" fn(*mut c_void)>, arg: *mut c_void) -> c_int,
>;
pub type simba_log_fn = Option<unsafe extern "C" fn(ud: *mut c_void, level: c_int, msg: *const c_char)>;
pub type simba_event_fn =
    Option<unsafe extern "C" fn(ud: *mut c_void, kind: simba_event_type_t, detail_json: *const c_char)>;
pub type simba_revoked_fn =
    Option<unsafe extern "C" fn(ud: *mut c_void, t: *mut simba_term_t, reason: simba_revoke_reason_t)>;
pub type simba_done_fn = Option<unsafe extern "C" fn(ud: *mut c_void, err: c_int)>;
pub type simba_lock_fn = Option<unsafe extern "C" fn(ud: *mut c_void, err: c_int, term: *mut simba_term_t)>;
pub type simba_observe_fn = Option<
    unsafe extern "C" fn(
        ud: *mut c_void,
        name: *const c_char,
        holder_session: *const c_char,
        holder_client: *const c_char,
        token: u64,
    ),
>;
pub type simba_work_fn = Option<unsafe extern "C" fn(ud: *mut c_void, term: *mut simba_term_t)>;

/// `simba_listener_t`: the only struct of the ABI.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct simba_listener_t {
    pub on_elected: Option<unsafe extern "C" fn(ud: *mut c_void, term: *mut simba_term_t)>,
    pub on_revoked:
        Option<unsafe extern "C" fn(ud: *mut c_void, term: *mut simba_term_t, reason: simba_revoke_reason_t)>,
    pub ud: *mut c_void,
}

extern "C" {
    pub fn simba_version() -> c_uint;
    pub fn simba_version_string() -> *const c_char;
    pub fn simba_strerror(err: c_int) -> *const c_char;
    pub fn simba_last_error() -> *const c_char;
    pub fn simba_free(p: *mut c_void);
    /// Since 1.3.
    pub fn simba_code_name(err: c_int) -> *const c_char;

    pub fn simba_config_new(out: *mut *mut simba_config_t) -> c_int;
    pub fn simba_config_copy(out: *mut *mut simba_config_t, c: *const simba_config_t) -> c_int;
    pub fn simba_config_free(c: *mut simba_config_t);
    pub fn simba_config_set(c: *mut simba_config_t, key: *const c_char, value: *const c_char) -> c_int;
    pub fn simba_config_set_ms(c: *mut simba_config_t, key: *const c_char, ms: i64) -> c_int;
    pub fn simba_config_get_ms(c: *const simba_config_t, key: *const c_char, out_ms: *mut i64) -> c_int;
    pub fn simba_config_get_double(c: *const simba_config_t, key: *const c_char, out: *mut f64) -> c_int;
    pub fn simba_config_set_executor(c: *mut simba_config_t, submit: simba_submit_fn, ctx: *mut c_void) -> c_int;
    pub fn simba_config_set_logger(
        c: *mut simba_config_t,
        log: simba_log_fn,
        ud: *mut c_void,
        min_level: c_int,
    ) -> c_int;
    pub fn simba_config_validate(c: *const simba_config_t) -> c_int;
    /// Since 1.2.
    pub fn simba_config_set_event_sink(cfg: *mut simba_config_t, f: simba_event_fn, ud: *mut c_void) -> c_int;

    pub fn simba_client_open(
        out: *mut *mut simba_client_t,
        backend_url: *const c_char,
        cfg: *const simba_config_t,
    ) -> c_int;
    pub fn simba_client_wait_live(c: *mut simba_client_t, timeout_ms: i64) -> c_int;
    pub fn simba_client_close(c: *mut simba_client_t) -> c_int;
    /// Since 1.2.
    pub fn simba_client_close_async(
        c: *mut simba_client_t,
        done: Option<unsafe extern "C" fn(ud: *mut c_void, err: c_int)>,
        ud: *mut c_void,
    ) -> c_int;
    pub fn simba_client_status(c: *const simba_client_t) -> simba_session_status_t;
    /// Since 1.3.
    pub fn simba_session_status_name(s: simba_session_status_t) -> *const c_char;
    pub fn simba_client_snapshot_json(c: *mut simba_client_t) -> *mut c_char;
    pub fn simba_client_inspect_json(
        c: *mut simba_client_t,
        names: *const *const c_char,
        n_names: usize,
        timeout_ms: i64,
        out_json: *mut *mut c_char,
    ) -> c_int;
    /// Since 1.2.
    pub fn simba_client_metrics_text(c: *mut simba_client_t) -> *mut c_char;
    /// Since 1.2.
    pub fn simba_observe_start(
        out: *mut *mut simba_observer_t,
        c: *mut simba_client_t,
        name: *const c_char,
        poll_ms: i64,
        f: simba_observe_fn,
        ud: *mut c_void,
    ) -> c_int;
    /// Since 1.2.
    pub fn simba_observer_free(o: *mut simba_observer_t);
    /// Since 1.4.
    pub fn simba_observer_close_async(o: *mut simba_observer_t, done: simba_done_fn, ud: *mut c_void) -> c_int;
    pub fn simba_client_on_event(c: *mut simba_client_t, f: simba_event_fn, ud: *mut c_void) -> c_int;
    /// Since 1.3.
    pub fn simba_event_name(kind: simba_event_type_t) -> *const c_char;
    pub fn simba_client_fd(c: *const simba_client_t) -> c_int;
    pub fn simba_client_timeout_ms(c: *const simba_client_t) -> i64;
    pub fn simba_client_process(c: *mut simba_client_t) -> c_int;

    /// Since 1.1.
    pub fn simba_backend_schema(backend_url: *const c_char, out_text: *mut *mut c_char) -> c_int;

    pub fn simba_term_name(t: *const simba_term_t) -> *const c_char;
    pub fn simba_term_token(t: *const simba_term_t) -> u64;
    /// Since 1.5.
    pub fn simba_term_kind(t: *const simba_term_t) -> simba_term_kind_t;
    /// Since 1.5.
    pub fn simba_term_kind_name(kind: simba_term_kind_t) -> *const c_char;
    pub fn simba_term_is_valid(t: *const simba_term_t) -> c_int;
    pub fn simba_term_remaining_ms(t: *const simba_term_t) -> i64;
    pub fn simba_term_ensure_valid(t: *const simba_term_t, min_remaining_ms: i64) -> c_int;
    pub fn simba_term_revoke_reason(t: *const simba_term_t) -> simba_revoke_reason_t;
    /// Since 1.3.
    pub fn simba_revoke_reason_name(reason: simba_revoke_reason_t) -> *const c_char;
    pub fn simba_term_on_revoked(t: *mut simba_term_t, f: simba_revoked_fn, ud: *mut c_void) -> c_int;
    pub fn simba_term_wait_revoked(t: *mut simba_term_t, timeout_ms: i64) -> c_int;
    pub fn simba_term_revoke_fd(t: *mut simba_term_t) -> c_int;
    pub fn simba_term_retain(t: *mut simba_term_t);
    pub fn simba_term_release(t: *mut simba_term_t);
    /// Since 1.4.
    pub fn simba_term_close_async(t: *mut simba_term_t, done: simba_done_fn, ud: *mut c_void) -> c_int;

    /// Since 1.3: `len` in bytes, or [`SIMBA_NAME_CSTRING`].
    pub fn simba_lease_name_check(name: *const c_char, len: usize) -> c_int;

    pub fn simba_election_start(
        out: *mut *mut simba_election_t,
        c: *mut simba_client_t,
        name: *const c_char,
        l: *const simba_listener_t,
    ) -> c_int;
    pub fn simba_election_stop(e: *mut simba_election_t, done: simba_done_fn, ud: *mut c_void) -> c_int;
    pub fn simba_election_step_down(
        e: *mut simba_election_t,
        cooldown_ms: i64,
        done: simba_done_fn,
        ud: *mut c_void,
    ) -> c_int;
    pub fn simba_election_stop_wait(e: *mut simba_election_t, timeout_ms: i64) -> c_int;
    pub fn simba_election_free(e: *mut simba_election_t);
    /// Since 1.4.
    pub fn simba_election_close_async(e: *mut simba_election_t, done: simba_done_fn, ud: *mut c_void) -> c_int;

    pub fn simba_lock_acquire(
        out: *mut *mut simba_term_t,
        c: *mut simba_client_t,
        name: *const c_char,
        timeout_ms: i64,
    ) -> c_int;
    pub fn simba_lock_try_acquire(out: *mut *mut simba_term_t, c: *mut simba_client_t, name: *const c_char) -> c_int;
    pub fn simba_lock_acquire_async(
        c: *mut simba_client_t,
        name: *const c_char,
        timeout_ms: i64,
        cb: simba_lock_fn,
        ud: *mut c_void,
    ) -> c_int;
    pub fn simba_lock_release(term: *mut simba_term_t) -> c_int;

    /// Since 1.5.
    pub fn simba_semaphore_acquire(
        out: *mut *mut simba_term_t,
        c: *mut simba_client_t,
        name: *const c_char,
        permits: u32,
        timeout_ms: i64,
    ) -> c_int;
    /// Since 1.5.
    pub fn simba_semaphore_try_acquire(
        out: *mut *mut simba_term_t,
        c: *mut simba_client_t,
        name: *const c_char,
        permits: u32,
    ) -> c_int;
    /// Since 1.5.
    pub fn simba_semaphore_acquire_async(
        c: *mut simba_client_t,
        name: *const c_char,
        permits: u32,
        timeout_ms: i64,
        cb: simba_lock_fn,
        ud: *mut c_void,
    ) -> c_int;
    /// Since 1.5: `mode` is [`SIMBA_LOCK_READ`] or [`SIMBA_LOCK_WRITE`].
    pub fn simba_rwlock_acquire(
        out: *mut *mut simba_term_t,
        c: *mut simba_client_t,
        name: *const c_char,
        mode: c_int,
        timeout_ms: i64,
    ) -> c_int;
    /// Since 1.5.
    pub fn simba_rwlock_try_acquire(
        out: *mut *mut simba_term_t,
        c: *mut simba_client_t,
        name: *const c_char,
        mode: c_int,
    ) -> c_int;
    /// Since 1.5.
    pub fn simba_rwlock_acquire_async(
        c: *mut simba_client_t,
        name: *const c_char,
        mode: c_int,
        timeout_ms: i64,
        cb: simba_lock_fn,
        ud: *mut c_void,
    ) -> c_int;

    pub fn simba_run_while_leader(
        out: *mut *mut simba_task_t,
        c: *mut simba_client_t,
        name: *const c_char,
        work: simba_work_fn,
        ud: *mut c_void,
    ) -> c_int;
    pub fn simba_schedule(
        out: *mut *mut simba_task_t,
        c: *mut simba_client_t,
        name: *const c_char,
        initial_delay_ms: i64,
        period_ms: i64,
        run: simba_work_fn,
        ud: *mut c_void,
    ) -> c_int;
    pub fn simba_group_join(
        out: *mut *mut simba_task_t,
        c: *mut simba_client_t,
        group: *const c_char,
        partitions: u32,
        work: simba_work_fn,
        ud: *mut c_void,
    ) -> c_int;
    pub fn simba_task_stop(t: *mut simba_task_t, done: simba_done_fn, ud: *mut c_void) -> c_int;
    pub fn simba_task_step_down(t: *mut simba_task_t, cooldown_ms: i64, done: simba_done_fn, ud: *mut c_void) -> c_int;
    pub fn simba_task_close(t: *mut simba_task_t) -> c_int;
    /// Since 1.4.
    pub fn simba_task_close_async(t: *mut simba_task_t, done: simba_done_fn, ud: *mut c_void) -> c_int;
}

#[cfg(simba_c_glue)]
extern "C" {
    /// Benchmark baseline written in C (csrc/glue.c): `n` cycles of
    /// `simba_lock_acquire` + `simba_lock_release`; elapsed ns or a negative code.
    pub fn simba_sys_glue_lock_cycles(c: *mut simba_client_t, name: *const c_char, n: i64, timeout_ms: i64) -> i64;
}

/// Whether the C glue (the benchmark's raw C loop) was compiled in.
pub const HAS_C_GLUE: bool = cfg!(simba_c_glue);

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use core::mem::{align_of, size_of};

    #[test]
    fn listener_layout_matches_c() {
        // struct { void (*)(...); void (*)(...); void *; } on every supported target.
        assert_eq!(size_of::<simba_listener_t>(), 3 * size_of::<*mut c_void>());
        assert_eq!(align_of::<simba_listener_t>(), align_of::<*mut c_void>());
        assert_eq!(core::mem::offset_of!(simba_listener_t, on_elected), 0);
        assert_eq!(core::mem::offset_of!(simba_listener_t, on_revoked), size_of::<*mut c_void>());
        assert_eq!(core::mem::offset_of!(simba_listener_t, ud), 2 * size_of::<*mut c_void>());
        // Function pointers in Option are nullable pointers of pointer size.
        assert_eq!(size_of::<simba_done_fn>(), size_of::<*mut c_void>());
        assert_eq!(size_of::<simba_submit_fn>(), size_of::<*mut c_void>());
    }

    #[test]
    fn library_version_matches_header() {
        let v = unsafe { simba_version() };
        assert_eq!(v >> 16, SIMBA_VERSION_MAJOR);
        assert!(v >= (SIMBA_VERSION_MAJOR << 16) | (SIMBA_VERSION_MINOR << 8));
        let s = unsafe { core::ffi::CStr::from_ptr(simba_version_string()) };
        assert!(s.to_str().unwrap().starts_with("1."));
    }

    fn text(p: *const c_char) -> &'static str {
        assert!(!p.is_null());
        unsafe { core::ffi::CStr::from_ptr(p) }.to_str().unwrap()
    }

    #[test]
    fn names_come_from_the_library() {
        unsafe {
            assert_eq!(text(simba_code_name(SIMBA_OK)), "OK");
            assert_eq!(text(simba_code_name(SIMBA_EBUSY)), "EBUSY");
            assert_eq!(text(simba_code_name(-99)), "UNKNOWN");
            assert_eq!(text(simba_session_status_name(SIMBA_SESSION_SUSPENDED)), "SUSPENDED");
            assert_eq!(text(simba_session_status_name(42)), "UNKNOWN");
            assert_eq!(text(simba_event_name(SIMBA_EVENT_SESSION_LEASE_SHORTENED)), "SESSION_LEASE_SHORTENED");
            assert_eq!(text(simba_event_name(-1)), "UNKNOWN");
            assert_eq!(text(simba_revoke_reason_name(SIMBA_REVOKE_TAKEN_OVER)), "TAKEN_OVER");
            assert_eq!(text(simba_revoke_reason_name(9)), "UNKNOWN");
            assert_eq!(text(simba_term_kind_name(SIMBA_TERM_SEMAPHORE)), "SEMAPHORE");
            assert_eq!(text(simba_term_kind_name(42)), "UNKNOWN");
            assert_eq!(simba_term_kind(core::ptr::null()), SIMBA_TERM_ELECTION);
        }
    }

    /// Every `SIMBA_API` function of the tree's simba.h is declared here and
    /// has a row in the README's table (skipped outside the source tree).
    #[test]
    fn every_header_function_is_declared_and_documented() {
        use std::string::String;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let Ok(header) = std::fs::read_to_string(root.join("../../../include/simba.h")) else {
            return;
        };
        let readme = std::fs::read_to_string(root.join("../README.md")).unwrap();
        let table = &readme[readme.find("## simba.h → Rust").expect("the README's table")..];
        let decls = include_str!("lib.rs");
        let mut n = 0;
        for line in header.lines().filter(|l| l.starts_with("SIMBA_API ")) {
            let name: String = line[..line.find('(').unwrap()].rsplit([' ', '*']).next().unwrap().into();
            assert!(decls.contains(&std::format!("pub fn {name}(")), "{name} is not declared");
            assert!(table.contains(&std::format!("`{name}`")), "{name} has no row in the README");
            n += 1;
        }
        assert!(n >= 70, "read {n} functions");
    }

    #[test]
    fn lease_name_check_counts_bytes() {
        unsafe {
            assert_eq!(simba_lease_name_check(c"jobs".as_ptr(), SIMBA_NAME_CSTRING), SIMBA_OK);
            assert_eq!(simba_lease_name_check(b"jobs\0-tenant".as_ptr().cast(), 12), SIMBA_EINVAL);
            assert!(text(simba_last_error()).contains("NUL"), "{}", text(simba_last_error()));
            // Counted: the bytes after `len` are not read.
            assert_eq!(simba_lease_name_check(b"jobs!".as_ptr().cast(), 4), SIMBA_OK);
        }
    }

    #[test]
    fn strerror_is_pinned() {
        for code in [SIMBA_OK, SIMBA_EINVAL, SIMBA_ECANCELED, -99] {
            let s = unsafe { core::ffi::CStr::from_ptr(simba_strerror(code)) };
            assert!(!s.to_bytes().is_empty());
        }
    }
}
