//! A small, stable content hash for the object cache.
//!
//! The cache key must be the same across runs, processes and Rust versions (it is stored in
//! `OUT_DIR`), which `std::hash::DefaultHasher` does not promise, and the allowed dependencies
//! include no hash crate. 128-bit FNV-1a is stable, simple and wide enough that an accidental
//! collision between two versions of one file is not a practical concern (the cache is not a
//! security boundary: whoever can write `OUT_DIR` can replace the object anyway).

use std::fmt;

const FNV128_OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
const FNV128_PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

/// An incremental 128-bit FNV-1a hasher.
#[derive(Debug, Clone)]
pub(crate) struct Hasher {
    state: u128,
}

impl Hasher {
    pub(crate) fn new() -> Hasher {
        Hasher { state: FNV128_OFFSET }
    }

    /// Feeds raw bytes.
    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> &mut Hasher {
        for &byte in bytes {
            self.state ^= u128::from(byte);
            self.state = self.state.wrapping_mul(FNV128_PRIME);
        }
        self
    }

    /// Feeds one field: its length first, so that `("ab", "c")` and `("a", "bc")` differ.
    pub(crate) fn field(&mut self, bytes: impl AsRef<[u8]>) -> &mut Hasher {
        let bytes = bytes.as_ref();
        self.bytes(&(bytes.len() as u64).to_le_bytes());
        self.bytes(bytes)
    }

    pub(crate) fn finish(&self) -> Digest {
        Digest(self.state)
    }
}

/// A finished hash; displayed as 32 lower-case hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Digest(u128);

impl Digest {
    /// The hash of `bytes` as one field.
    pub(crate) fn of(bytes: impl AsRef<[u8]>) -> Digest {
        Hasher::new().field(bytes).finish()
    }

    /// Parses the 32-hex-digit form written by `Display`.
    pub(crate) fn parse(text: &str) -> Option<Digest> {
        if text.len() != 32 {
            return None;
        }
        u128::from_str_radix(text, 16).ok().map(Digest)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_published_fnv1a_128_vectors() {
        // Test vectors of FNV-1a 128 (draft-eastlake-fnv, and the reference implementation).
        assert_eq!(Hasher::new().finish().to_string(), "6c62272e07bb014262b821756295c58d");
        assert_eq!(
            Hasher::new().bytes(b"a").finish().to_string(),
            "d228cb696f1a8caf78912b704e4a8964"
        );
        assert_eq!(
            Hasher::new().bytes(b"foobar").finish().to_string(),
            "343e1662793c64bf6f0d3597ba446f18"
        );
    }

    #[test]
    fn fields_are_length_prefixed() {
        let ab_c = Hasher::new().field("ab").field("c").finish();
        let a_bc = Hasher::new().field("a").field("bc").finish();
        assert_ne!(ab_c, a_bc);
    }

    #[test]
    fn digest_round_trips_through_text() {
        let digest = Digest::of("some text");
        assert_eq!(Digest::parse(&digest.to_string()), Some(digest));
        assert_eq!(Digest::parse("xyz"), None);
        assert_eq!(Digest::parse(&"g".repeat(32)), None);
    }
}
