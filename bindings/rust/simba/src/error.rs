use std::ffi::CStr;
use std::fmt;

use simba_sys as sys;

/// The kind of a failure: one per `SIMBA_E*` code of the C ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// `SIMBA_EINVAL`: bad argument (lease name, URL, config rule, ...).
    InvalidArgument,
    /// `SIMBA_ESTATE`: not allowed now (already started, already stopped, ...).
    State,
    /// `SIMBA_EEXPIRED`: the term is not valid, or not for long enough.
    Expired,
    /// `SIMBA_ETIMEDOUT`: the timeout passed first.
    TimedOut,
    /// `SIMBA_EBACKEND`: backend unreachable or answered an error.
    Backend,
    /// `SIMBA_ECLOSED`: the client is closed or closing.
    Closed,
    /// `SIMBA_ENOMEM`: out of memory.
    NoMemory,
    /// `SIMBA_EWOULDBLOCK`: a blocking call from a callback, leader work or the loop thread.
    WouldBlock,
    /// `SIMBA_EBUSY`: try-lock found the lease held by someone else.
    Busy,
    /// `SIMBA_EUNSUPPORTED`: URL scheme or feature not built in.
    Unsupported,
    /// `SIMBA_ECANCELED`: an asynchronous call was cancelled by stop or close.
    Canceled,
    /// A code this binding does not know (a newer library).
    Unknown,
}

impl ErrorKind {
    /// The kind of a negative `SIMBA_E*` code.
    pub fn from_code(code: i32) -> ErrorKind {
        match code {
            sys::SIMBA_EINVAL => ErrorKind::InvalidArgument,
            sys::SIMBA_ESTATE => ErrorKind::State,
            sys::SIMBA_EEXPIRED => ErrorKind::Expired,
            sys::SIMBA_ETIMEDOUT => ErrorKind::TimedOut,
            sys::SIMBA_EBACKEND => ErrorKind::Backend,
            sys::SIMBA_ECLOSED => ErrorKind::Closed,
            sys::SIMBA_ENOMEM => ErrorKind::NoMemory,
            sys::SIMBA_EWOULDBLOCK => ErrorKind::WouldBlock,
            sys::SIMBA_EBUSY => ErrorKind::Busy,
            sys::SIMBA_EUNSUPPORTED => ErrorKind::Unsupported,
            sys::SIMBA_ECANCELED => ErrorKind::Canceled,
            _ => ErrorKind::Unknown,
        }
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
        write!(f, "simba: {} ({:?}, code {})", self.message, self.kind, self.code)
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

/// A Rust string as a C string; an interior NUL is `InvalidArgument`.
pub(crate) fn cstring(s: &str, what: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(s).map_err(|_| Error::with_message(sys::SIMBA_EINVAL, format!("{what} contains a NUL byte")))
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
        assert_eq!(ErrorKind::from_code(-12), ErrorKind::Unknown);
    }

    #[test]
    fn message_falls_back_to_strerror_and_display_names_all() {
        let e = Error::code_only(sys::SIMBA_ETIMEDOUT);
        assert_eq!(e.code(), sys::SIMBA_ETIMEDOUT);
        let strerror = unsafe { CStr::from_ptr(sys::simba_strerror(sys::SIMBA_ETIMEDOUT)) }.to_str().unwrap();
        assert_eq!(e.message(), strerror);
        let shown = e.to_string();
        assert!(shown.contains(strerror) && shown.contains("TimedOut") && shown.contains("-4"), "{shown}");
        let io: std::io::Error = Error::with_message(sys::SIMBA_EBUSY, "held".into()).into();
        assert_eq!(io.kind(), std::io::ErrorKind::ResourceBusy);
        assert!(io.to_string().contains("held"));
    }

    #[test]
    fn a_nul_in_a_name_is_an_invalid_argument() {
        let e = cstring("a\0b", "lease name").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("lease name"));
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
