//! Identify data structures (Base §5.17.2, NVM Command Set §4.1.5): what the Identify command
//! returns for each CNS value the target serves.
//!
//! - [`IdentifyController`] (CNS 01h, Base Figure 275),
//! - [`IdentifyNamespace`] (CNS 00h, NVM Figure 97),
//! - [`ActiveNsList`] (CNS 02h, Base §5.17.2.2),
//! - [`NsIdDescriptorList`] (CNS 03h, Base Figure 278).
//!
//! Every structure is exactly [`IDENTIFY_DATA_LEN`] bytes. Reserved bytes of these structures
//! are **ignored on parse and zeroed on emit**: a peer built against a later revision may fill
//! them, and refusing its whole Identify data for that would be worse than not reading a field
//! we do not model. Byte-for-byte round trips therefore hold for buffers whose reserved bytes
//! are zero; value round trips (`parse(emit(v)) == v`) hold for every value that emits.
//! Vendor-specific areas and power state descriptors are kept as raw bytes, so they round trip.

use crate::bytes::{le128, le16, le32, le64, put_le128, put_le16, put_le32, put_le64, Field};
use crate::error::ParseError;
use crate::text::{emit_ascii, parse_ascii};

mod controller;
mod lists;
mod namespace;

pub use controller::{
    cmic, ctratt, lpa, oacs, oncs, sgls, vwc, ControllerType, IdentifyController,
    PowerStateDescriptor,
};
pub(crate) use lists::{emit_id_list, parse_id_list};
pub use lists::{ActiveNsList, NsIdDescriptor, NsIdDescriptorList, NsIdType, NS_LIST_MAX};
pub use namespace::{IdentifyNamespace, LbaFormat};

/// Size of every Identify data structure.
pub const IDENTIFY_DATA_LEN: usize = 4096;

code_newtype! {
    /// Controller or Namespace Structure (Identify CDW10 bits 7:0; Base Figure 273).
    pub struct Cns(u8) {
        /// Identify Namespace data structure for the NSID (NVM command set).
        NAMESPACE = 0x00,
        /// Identify Controller data structure.
        CONTROLLER = 0x01,
        /// Active Namespace ID list (NSIDs greater than the command's NSID).
        ACTIVE_NS_LIST = 0x02,
        /// Namespace Identification Descriptor list for the NSID.
        NS_ID_DESCRIPTORS = 0x03,
        /// NVM Set list.
        NVM_SET_LIST = 0x04,
        /// I/O command set specific Identify Namespace data structure (CSI selects the set).
        CS_NAMESPACE = 0x05,
        /// I/O command set specific Identify Controller data structure.
        CS_CONTROLLER = 0x06,
        /// Active Namespace ID list for the I/O command set given by CSI.
        CS_ACTIVE_NS_LIST = 0x07,
        /// I/O command set independent Identify Namespace data structure.
        CS_INDEPENDENT_NAMESPACE = 0x08,
        /// Allocated Namespace ID list.
        ALLOCATED_NS_LIST = 0x10,
        /// Identify Namespace data structure for an allocated NSID.
        ALLOCATED_NAMESPACE = 0x11,
        /// Controller list of controllers attached to the NSID.
        NS_CONTROLLER_LIST = 0x12,
        /// Controller list of controllers in the NVM subsystem.
        CONTROLLER_LIST = 0x13,
        /// Primary Controller Capabilities.
        PRIMARY_CONTROLLER_CAPS = 0x14,
        /// Secondary Controller list.
        SECONDARY_CONTROLLER_LIST = 0x15,
        /// Namespace Granularity list.
        NS_GRANULARITY = 0x16,
        /// UUID list.
        UUID_LIST = 0x17,
        /// Domain list.
        DOMAIN_LIST = 0x18,
        /// Endurance Group list.
        ENDURANCE_GROUP_LIST = 0x19,
        /// I/O Command Set data structure (combinations the controller supports).
        IO_COMMAND_SET = 0x1C,
    }
}

code_newtype! {
    /// Command Set Identifier (Base Figure 287), in Identify CDW11 bits 31:24, Get Log Page
    /// CDW14 bits 31:24 and the CSI namespace identification descriptor.
    pub struct Csi(u8) {
        /// NVM Command Set.
        NVM = 0x00,
        /// Key Value Command Set.
        KEY_VALUE = 0x01,
        /// Zoned Namespace Command Set.
        ZONED = 0x02,
    }
}

/// A fixed-size run of bytes kept verbatim (vendor-specific areas, opaque descriptors).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Opaque<const N: usize>(pub [u8; N]);

impl<const N: usize> Default for Opaque<N> {
    fn default() -> Self {
        Opaque([0; N])
    }
}

impl<const N: usize> core::fmt::Debug for Opaque<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let nonzero = self.0.iter().filter(|&&b| b != 0).count();
        write!(f, "Opaque<{N}>({nonzero} non-zero bytes)")
    }
}

impl<const N: usize> Opaque<N> {
    /// Copies exactly `N` bytes from `b` (the caller has checked the length).
    pub(crate) fn read(b: &[u8], f: Field) -> Self {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[f]);
        Opaque(a)
    }

    /// Writes the bytes into `f` (exactly `N` bytes long).
    pub(crate) fn write(&self, b: &mut [u8], f: Field) {
        b[f].copy_from_slice(&self.0);
    }
}

/// Little-endian integers and byte arrays read from and written to a [`Field`], so structures
/// with dozens of fields can list them once per direction without choosing a helper each time.
pub(crate) trait Le: Sized {
    /// Reads the value from `f` (whose width matches the type).
    fn get(b: &[u8], f: Field) -> Self;
    /// Writes the value into `f`.
    fn put(self, b: &mut [u8], f: Field);
}

impl Le for u8 {
    fn get(b: &[u8], f: Field) -> Self {
        b[f.start]
    }
    fn put(self, b: &mut [u8], f: Field) {
        b[f.start] = self;
    }
}

impl Le for u16 {
    fn get(b: &[u8], f: Field) -> Self {
        le16(b, f)
    }
    fn put(self, b: &mut [u8], f: Field) {
        put_le16(b, f, self)
    }
}

impl Le for u32 {
    fn get(b: &[u8], f: Field) -> Self {
        le32(b, f)
    }
    fn put(self, b: &mut [u8], f: Field) {
        put_le32(b, f, self)
    }
}

impl Le for u64 {
    fn get(b: &[u8], f: Field) -> Self {
        le64(b, f)
    }
    fn put(self, b: &mut [u8], f: Field) {
        put_le64(b, f, self)
    }
}

impl Le for u128 {
    fn get(b: &[u8], f: Field) -> Self {
        le128(b, f)
    }
    fn put(self, b: &mut [u8], f: Field) {
        put_le128(b, f, self)
    }
}

impl<const N: usize> Le for [u8; N] {
    fn get(b: &[u8], f: Field) -> Self {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[f]);
        a
    }
    fn put(self, b: &mut [u8], f: Field) {
        b[f].copy_from_slice(&self);
    }
}

/// Reads a value of type `T` from `f`.
pub(crate) fn get<T: Le>(b: &[u8], f: Field) -> T {
    T::get(b, f)
}

/// Writes `v` into `f`.
pub(crate) fn put<T: Le>(b: &mut [u8], f: Field, v: T) {
    v.put(b, f)
}

/// Reads a space-padded ASCII field (Base §1.5 "ASCII string"), refusing NULs inside the text:
/// [`crate::text::parse_ascii`] only strips trailing NULs, and an inner NUL would not survive a
/// round trip through [`emit_ascii_field`].
pub(crate) fn parse_ascii_field(
    what: &'static str,
    field: &'static str,
    b: &[u8],
    f: Field,
) -> Result<String, ParseError> {
    let s = parse_ascii(what, field, f.start, &b[f.clone()])?;
    if s.contains('\0') {
        return Err(ParseError::InvalidText {
            what,
            field,
            offset: f.start,
            reason: "NUL inside the text",
        });
    }
    Ok(s)
}

/// Writes a space-padded ASCII field. Unlike [`crate::text::emit_ascii`], text that would not
/// read back the same (longer than the field, non-printable, trailing spaces) is an error rather
/// than silently changed.
pub(crate) fn emit_ascii_field(
    what: &'static str,
    field: &'static str,
    b: &mut [u8],
    f: Field,
    s: &str,
) -> Result<(), ParseError> {
    let offset = f.start;
    let err = |reason| ParseError::InvalidText {
        what,
        field,
        offset,
        reason,
    };
    if s.len() > f.len() {
        return Err(err("longer than the field"));
    }
    if !s.bytes().all(|c| (0x20..0x7F).contains(&c)) {
        return Err(err("not printable ASCII"));
    }
    if s.ends_with(' ') {
        return Err(err("trailing spaces are padding"));
    }
    emit_ascii(&mut b[f], s);
    Ok(())
}

/// Like [`parse_ascii_field`] for fields the specification clears to zero when unused
/// (firmware slots): the empty string emits as zeros via [`emit_ascii_or_zero`].
pub(crate) fn emit_ascii_or_zero(
    what: &'static str,
    field: &'static str,
    b: &mut [u8],
    f: Field,
    s: &str,
) -> Result<(), ParseError> {
    if s.is_empty() {
        b[f].fill(0);
        Ok(())
    } else {
        emit_ascii_field(what, field, b, f, s)
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Helpers shared by the byte-layout tests of the structures in this crate's admin side.

    use crate::bytes::Field;

    /// Zeroes every listed range (reserved bytes) so a random buffer becomes a canonical one.
    pub fn zero(b: &mut [u8], reserved: &[Field]) {
        for f in reserved {
            b[f.clone()].fill(0);
        }
    }

    /// Replaces a range with printable ASCII derived from its bytes, with no trailing spaces
    /// unless the whole field is spaces (what [`super::emit_ascii_field`] writes back).
    pub fn ascii(b: &mut [u8], f: Field) {
        for c in &mut b[f.clone()] {
            *c = 0x20 + *c % 95;
        }
        // Trailing spaces are padding: canonical form is text then spaces, which is what we have.
    }

    /// Replaces a range with a NUL-padded NQN-like text of 1..=223 printable bytes derived from
    /// the range's first byte.
    pub fn nqn(b: &mut [u8], f: Field) {
        let len = 1 + usize::from(b[f.start]) % 223.min(f.len() - 1);
        let r = &mut b[f];
        for (i, c) in r.iter_mut().enumerate() {
            *c = if i < len { 0x21 + *c % 94 } else { 0 };
        }
    }
}
