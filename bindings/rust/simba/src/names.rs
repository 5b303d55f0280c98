//! Names of the C enums, from the library (`simba_*_name`).

/// A Rust enum over a C enum: one table gives the variants, both directions
/// of the mapping (`of`, `$raw`), `name()` from the library's `$name_fn`, and
/// `Display` (`UNKNOWN(n)` where the library has no name either). A value the
/// table lacks (a newer library) is kept as `Other(n)`.
macro_rules! c_enum {
    (
        $(#[$meta:meta])*
        pub enum $ty:ident, raw $raw:ident, named $name_fn:path {
            $($(#[$vmeta:meta])* $var:ident = $c:path,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $ty {
            $($(#[$vmeta])* $var,)*
            /// A value this binding does not know (a newer library).
            Other(i32),
        }

        impl $ty {
            pub(crate) fn of(v: i32) -> $ty {
                match v {
                    $($c => $ty::$var,)*
                    v => $ty::Other(v),
                }
            }

            /// The C value.
            pub fn $raw(self) -> i32 {
                match self {
                    $($ty::$var => $c,)*
                    $ty::Other(v) => v,
                }
            }

            /// The library's name of the value; `"UNKNOWN"` for one it does not define.
            pub fn name(self) -> &'static str {
                $crate::names::lib_str(unsafe { $name_fn(self.$raw()) })
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                $crate::names::fmt_name(f, self.name(), self.$raw())
            }
        }
    };
}

/// A static string of the library (its names never are NULL nor freed).
pub(crate) fn lib_str(p: *const std::ffi::c_char) -> &'static str {
    if p.is_null() {
        return "UNKNOWN";
    }
    unsafe { std::ffi::CStr::from_ptr(p) }.to_str().unwrap_or("UNKNOWN")
}

/// Writes a library name; one the library does not know keeps its number:
/// `UNKNOWN(9)`.
pub(crate) fn fmt_name(f: &mut std::fmt::Formatter<'_>, name: &str, raw: i32) -> std::fmt::Result {
    if name == "UNKNOWN" {
        write!(f, "UNKNOWN({raw})")
    } else {
        f.write_str(name)
    }
}
