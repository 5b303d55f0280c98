use std::ffi::{CStr, CString};
use std::fmt;

use simba_sys as sys;

c_enum! {
    /// The kind of a failure: one per `SIMBA_E*` code of the C ABI. `Display`
    /// prints the library's name of the code (`EINVAL`, `EBUSY`, ...; `simba_code_name`).
    pub enum ErrorKind, raw code, named sys::simba_code_name {
        /// `SIMBA_EINVAL`: bad argument (lease name, URL, config rule, a NUL byte in a string, ...).
        InvalidArgument = sys::SIMBA_EINVAL,
        /// `SIMBA_ESTATE`: not allowed now (already started, already stopped, ...).
        State = sys::SIMBA_ESTATE,
        /// `SIMBA_EEXPIRED`: the term is not valid, or not for long enough.
        Expired = sys::SIMBA_EEXPIRED,
        /// `SIMBA_ETIMEDOUT`: the timeout passed first.
        TimedOut = sys::SIMBA_ETIMEDOUT,
        /// `SIMBA_EBACKEND`: backend unreachable or answered an error.
        Backend = sys::SIMBA_EBACKEND,
        /// `SIMBA_ECLOSED`: the client is closed or closing.
        Closed = sys::SIMBA_ECLOSED,
        /// `SIMBA_ENOMEM`: out of memory.
        NoMemory = sys::SIMBA_ENOMEM,
        /// `SIMBA_EWOULDBLOCK`: a blocking call from a callback, leader work or the loop thread.
        WouldBlock = sys::SIMBA_EWOULDBLOCK,
        /// `SIMBA_EBUSY`: try-lock found the lease held by someone else.
        Busy = sys::SIMBA_EBUSY,
        /// `SIMBA_EUNSUPPORTED`: URL scheme or feature not built in.
        Unsupported = sys::SIMBA_EUNSUPPORTED,
        /// `SIMBA_ECANCELED`: an asynchronous call was cancelled by stop or close.
        Canceled = sys::SIMBA_ECANCELED,
    }
}

impl ErrorKind {
    /// The kind of a negative `SIMBA_E*` code.
    pub fn from_code(code: i32) -> ErrorKind {
        ErrorKind::of(code)
    }
}

/// A failed Simba call: its kind, its C code and the library's detail message.
///
/// ```
/// let err = simba::Client::open("nosuchscheme://x").unwrap_err();
/// assert_eq!(err.kind(), simba::ErrorKind::Unsupported);
/// assert!(!err.message().is_empty());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    code: i32,
    message: String,
}

impl Error {
    /// The error of a call that just returned `code`, with this thread's
    /// `simba_last_error()` detail (read at once, on the failing thread).
    pub(crate) fn last(code: i32) -> Error {
        let detail = unsafe { CStr::from_ptr(sys::simba_last_error()) }.to_string_lossy().into_owned();
        Error::with_message(code, detail)
    }

    /// An error of an asynchronous completion: the code only (the detail of an
    /// asynchronous failure is not kept by the library), so the message is
    /// `simba_strerror(code)`.
    pub(crate) fn code_only(code: i32) -> Error {
        Error::with_message(code, String::new())
    }

    pub(crate) fn with_message(code: i32, message: String) -> Error {
        let message = if message.is_empty() {
            unsafe { CStr::from_ptr(sys::simba_strerror(code)) }.to_string_lossy().into_owned()
        } else {
            message
        };
        Error { kind: ErrorKind::from_code(code), code, message }
    }

    /// What failed, as a kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The raw `SIMBA_E*` code (negative).
    pub fn code(&self) -> i32 {
        self.code
    }
    /// The library's detail message (never empty: falls back to the code's text).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("code", &self.code)
            .field("message", &self.message)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "simba: {} ({}, code {})", self.message, self.kind, self.code)
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        use std::io::ErrorKind as K;
        let kind = match e.kind {
            ErrorKind::InvalidArgument => K::InvalidInput,
            ErrorKind::TimedOut => K::TimedOut,
            ErrorKind::WouldBlock => K::WouldBlock,
            ErrorKind::Unsupported => K::Unsupported,
            ErrorKind::NoMemory => K::OutOfMemory,
            ErrorKind::Busy => K::ResourceBusy,
            _ => K::Other,
        };
        std::io::Error::new(kind, e)
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Maps a C return code: OK, or the error with this thread's detail.
#[inline]
pub(crate) fn check(rc: i32) -> Result<()> {
    if rc == sys::SIMBA_OK {
        Ok(())
    } else {
        Err(Error::last(rc))
    }
}

#[inline]
pub(crate) fn check_async(rc: i32) -> Result<()> {
    if rc == sys::SIMBA_OK {
        Ok(())
    } else {
        Err(Error::code_only(rc))
    }
}

/// A Rust string as a C string. A NUL byte inside would silently end the
/// string in C: it is `InvalidArgument`, naming `what` the string was.
pub(crate) fn cstring(s: &str, what: impl fmt::Display) -> Result<CString> {
    CString::new(s).map_err(|e| {
        Error::with_message(sys::SIMBA_EINVAL, format!("{what} contains a NUL byte at index {}", e.nul_position()))
    })
}

/// A lease name as a C string; a NUL byte inside is refused with the
/// library's message (`simba_lease_name_check`). Other rules are checked by
/// the call that takes the name.
pub(crate) fn lease_cstring(name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| match check_lease_name(name) {
        Err(e) => e,
        Ok(()) => Error::with_message(sys::SIMBA_EINVAL, "lease name contains a NUL byte".into()),
    })
}

/// Checks `name` against the lease-name rule of the library
/// (`simba_lease_name_check`): 1-128 characters of `[A-Za-z0-9._:-]`, other
/// than `.` and `..`. Every byte counts: a NUL byte is refused.
///
/// ```
/// simba::check_lease_name("jobs.tenant-1")?;
/// let e = simba::check_lease_name("jobs\0-tenant-1").unwrap_err();
/// assert_eq!(e.kind(), simba::ErrorKind::InvalidArgument);
/// assert!(e.message().contains("NUL"), "{e}");
/// # Ok::<(), simba::Error>(())
/// ```
pub fn check_lease_name(name: &str) -> Result<()> {
    check(unsafe { sys::simba_lease_name_check(name.as_ptr().cast(), name.len()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_own_kind() {
        let codes = [
            (sys::SIMBA_EINVAL, ErrorKind::InvalidArgument),
            (sys::SIMBA_ESTATE, ErrorKind::State),
            (sys::SIMBA_EEXPIRED, ErrorKind::Expired),
            (sys::SIMBA_ETIMEDOUT, ErrorKind::TimedOut),
            (sys::SIMBA_EBACKEND, ErrorKind::Backend),
            (sys::SIMBA_ECLOSED, ErrorKind::Closed),
            (sys::SIMBA_ENOMEM, ErrorKind::NoMemory),
            (sys::SIMBA_EWOULDBLOCK, ErrorKind::WouldBlock),
            (sys::SIMBA_EBUSY, ErrorKind::Busy),
            (sys::SIMBA_EUNSUPPORTED, ErrorKind::Unsupported),
            (sys::SIMBA_ECANCELED, ErrorKind::Canceled),
        ];
        for (code, kind) in codes {
            assert_eq!(ErrorKind::from_code(code), kind, "code {code}");
        }
        let mut kinds: Vec<_> = codes.iter().map(|(_, k)| format!("{k:?}")).collect();
        kinds.dedup();
        assert_eq!(kinds.len(), codes.len());
        assert_eq!(ErrorKind::from_code(-12), ErrorKind::Other(-12));
        for (code, kind) in codes {
            assert_eq!(kind.code(), code);
        }
    }

    #[test]
    fn kinds_print_the_library_names_and_keep_unknown_codes() {
        assert_eq!(ErrorKind::InvalidArgument.to_string(), "EINVAL");
        assert_eq!(ErrorKind::Busy.to_string(), "EBUSY");
        assert_eq!(ErrorKind::Canceled.name(), "ECANCELED");
        let unknown = ErrorKind::from_code(-77);
        assert_eq!(unknown, ErrorKind::Other(-77));
        assert_eq!(unknown.code(), -77);
        assert_eq!(unknown.name(), "UNKNOWN");
        assert_eq!(unknown.to_string(), "UNKNOWN(-77)");
        let e = Error::code_only(-77);
        assert_eq!(e.kind(), ErrorKind::Other(-77));
        assert!(e.to_string().contains("UNKNOWN(-77)"), "{e}");
    }

    #[test]
    fn message_falls_back_to_strerror_and_display_names_all() {
        let e = Error::code_only(sys::SIMBA_ETIMEDOUT);
        assert_eq!(e.code(), sys::SIMBA_ETIMEDOUT);
        let strerror = unsafe { CStr::from_ptr(sys::simba_strerror(sys::SIMBA_ETIMEDOUT)) }.to_str().unwrap();
        assert_eq!(e.message(), strerror);
        let shown = e.to_string();
        assert!(shown.contains(strerror) && shown.contains("ETIMEDOUT") && shown.contains("-4"), "{shown}");
        let io: std::io::Error = Error::with_message(sys::SIMBA_EBUSY, "held".into()).into();
        assert_eq!(io.kind(), std::io::ErrorKind::ResourceBusy);
        assert!(io.to_string().contains("held"));
    }

    #[test]
    fn a_nul_in_a_string_is_an_invalid_argument() {
        let e = cstring("memory://a\0b", "backend URL").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(e.message(), "backend URL contains a NUL byte at index 10");
        let e = cstring("x\0", format_args!("config value of {}", "client.name")).unwrap_err();
        assert_eq!(e.message(), "config value of client.name contains a NUL byte at index 1");
        // Lease names: the library's message.
        let e = lease_cstring("jobs\0-tenant-1").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("NUL") && e.message().contains("index 4"), "{e}");
        assert!(lease_cstring("jobs").is_ok());
    }

    #[test]
    fn last_error_is_read_on_the_failing_thread() {
        // A failing call sets this thread's detail; another thread's stays its own.
        let mut out = std::ptr::null_mut();
        let rc = unsafe { sys::simba_client_open(&mut out, c"bogus://x".as_ptr(), std::ptr::null()) };
        let e = Error::last(rc);
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(!e.message().is_empty());
        let other =
            std::thread::spawn(|| unsafe { CStr::from_ptr(sys::simba_last_error()) }.to_string_lossy().into_owned())
                .join()
                .unwrap();
        assert_eq!(other, "", "a fresh thread has no detail");
    }
}
