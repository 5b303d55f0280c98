//! Session status and session events: plain values whose text comes from the
//! library (`simba_session_status_name`, `simba_event_name`).
use std::ffi::{c_char, CStr};

use simba_sys as sys;

c_enum! {
    /// Session status ([`Client::status`](crate::Client::status)). `Display`
    /// prints the library's name (`LIVE`, ...; `simba_session_status_name`).
    pub enum SessionStatus, raw raw, named sys::simba_session_status_name {
        /// No session yet, or a new one after the last ended.
        Opening = sys::SIMBA_SESSION_OPENING,
        /// The last keep-alive succeeded.
        Live = sys::SIMBA_SESSION_LIVE,
        /// The last keep-alive failed; the deadline has not passed.
        Suspended = sys::SIMBA_SESSION_SUSPENDED,
        /// Closed.
        Closed = sys::SIMBA_SESSION_CLOSED,
    }
}

impl SessionStatus {
    /// The status of a raw `simba_session_status_t`.
    pub fn from_raw(s: i32) -> SessionStatus {
        SessionStatus::of(s)
    }
}

c_enum! {
    /// Kinds of session events. `Display` prints the library's name
    /// (`SESSION_OPENED`, ...; `simba_event_name`).
    pub enum EventKind, raw raw, named sys::simba_event_name {
        /// A new session id was granted.
        SessionOpened = sys::SIMBA_EVENT_SESSION_OPENED,
        /// A keep-alive succeeded after a failure.
        SessionLive = sys::SIMBA_EVENT_SESSION_LIVE,
        /// A keep-alive failed.
        SessionSuspended = sys::SIMBA_EVENT_SESSION_SUSPENDED,
        /// The session ended: the backend said expired, or the deadline passed.
        SessionExpired = sys::SIMBA_EVENT_SESSION_EXPIRED,
        /// The client closed its session.
        SessionClosed = sys::SIMBA_EVENT_SESSION_CLOSED,
        /// The backend granted too little: renewing faster (once per session).
        SessionLeaseShortened = sys::SIMBA_EVENT_SESSION_LEASE_SHORTENED,
    }
}

impl EventKind {
    /// The kind of a raw `simba_event_type_t`.
    pub fn from_raw(k: i32) -> EventKind {
        EventKind::of(k)
    }
}

/// A session event, as delivered to [`Client::on_event`](crate::Client::on_event)
/// and [`Config::event_sink`](crate::Config::event_sink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The library's JSON detail (session id, ...).
    pub detail_json: String,
}

impl Event {
    /// An event from a sink's C arguments (`detail` borrowed for the call).
    pub(crate) unsafe fn from_c(kind: sys::simba_event_type_t, detail: *const c_char) -> Event {
        Event {
            kind: EventKind::from_raw(kind),
            detail_json: if detail.is_null() {
                String::new()
            } else {
                CStr::from_ptr(detail).to_string_lossy().into_owned()
            },
        }
    }
}

/// An event sink: a closure of the client or of its config.
pub(crate) type Sink = Box<dyn FnMut(&Event) + Send>;
