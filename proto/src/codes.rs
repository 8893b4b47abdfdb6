//! The `code_newtype!` macro: an integer newtype with named constants that keeps unknown values.
//!
//! Protocol codes chosen by a peer (opcodes, status codes, log identifiers) must survive parsing
//! even when we do not know them, so the target can answer "invalid opcode" for exactly that
//! opcode. The generated type is `Copy`, compares by value, prints its name when known and its
//! value in hex otherwise, and lists its known values for tests.

/// Defines `pub struct $name(pub $int)` with associated constants and a name lookup. Exported
/// for the other wire-format crates (`raidline-scsi`'s iSCSI codes).
#[macro_export]
#[doc(hidden)]
macro_rules! code_newtype {
    (
        $(#[$meta:meta])*
        pub struct $name:ident($int:ty) {
            $( $(#[$cmeta:meta])* $cname:ident = $value:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub $int);

        impl $name {
            $( $(#[$cmeta])* pub const $cname: $name = $name($value); )*

            /// Every named value of this type, in declaration order.
            pub const KNOWN: &'static [$name] = &[ $( $name($value), )* ];

            /// The constant's name, or `None` for a value this crate does not name.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( v if v == $value => Some(stringify!($cname)), )*
                    _ => None,
                }
            }

            /// Whether this value is one of the named constants.
            pub fn is_known(self) -> bool {
                self.name().is_some()
            }
        }

        impl From<$int> for $name {
            fn from(v: $int) -> Self {
                $name(v)
            }
        }

        impl From<$name> for $int {
            fn from(v: $name) -> Self {
                v.0
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{}::{}({:#x})", stringify!($name), n, self.0),
                    None => write!(f, "{}({:#x})", stringify!($name), self.0),
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{:#x}", self.0),
                }
            }
        }
    };
}
