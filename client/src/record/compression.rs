//! Batch compression codecs, by the numbers Kafka puts in a batch's attributes. The codecs
//! themselves come from the `kafka-protocol` crate (snappy in the xerial framing Java writes).

use std::fmt;
use std::str::FromStr;

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Decompressor, Gzip, Lz4, Snappy, Zstd};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    /// Needs Produce v7+ (Kafka 2.1); older brokers refuse it.
    Zstd,
}

impl Compression {
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec's bits in a batch's attributes.
    pub fn attribute_bits(self) -> i16 {
        match self {
            Self::None => 0,
            Self::Gzip => 1,
            Self::Snappy => 2,
            Self::Lz4 => 3,
            Self::Zstd => 4,
        }
    }

    pub fn from_attribute_bits(bits: i16) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|c| c.attribute_bits() == bits & 0x07)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Gzip => "gzip",
            Self::Snappy => "snappy",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }

    /// Appends `input`, compressed, to `out`.
    pub(crate) fn compress(self, input: &[u8], out: &mut BytesMut) -> Result<(), String> {
        let copy_in = |tmp: &mut BytesMut| {
            tmp.extend_from_slice(input);
            Ok(())
        };
        let done = match self {
            Self::None => {
                out.extend_from_slice(input);
                Ok(())
            }
            Self::Gzip => Gzip::compress(out, copy_in),
            Self::Snappy => Snappy::compress(out, copy_in),
            Self::Lz4 => Lz4::compress(out, copy_in),
            Self::Zstd => Zstd::compress(out, copy_in),
        };
        done.map_err(|e| format!("{} compression failed: {e}", self.name()))
    }

    /// The uncompressed records of a batch. The codec libraries do not bound the output, so a
    /// hostile broker could still send a compression bomb; record counts are checked afterwards.
    pub(crate) fn decompress(self, mut input: Bytes) -> Result<Bytes, String> {
        let take = |buf: &mut Bytes| Ok(std::mem::take(buf));
        let done = match self {
            Self::None => return Ok(input),
            Self::Gzip => Gzip::decompress(&mut input, take),
            Self::Snappy => Snappy::decompress(&mut input, take),
            Self::Lz4 => Lz4::decompress(&mut input, take),
            Self::Zstd => Zstd::decompress(&mut input, take),
        };
        done.map_err(|e| format!("{} decompression failed: {e}", self.name()))
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compression {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!("unknown compression '{s}': use none, gzip, snappy, lz4 or zstd")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips() {
        let input: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 97).to_le_bytes())
            .collect();
        for codec in Compression::ALL {
            let mut out = BytesMut::from(&b"prefix"[..]);
            codec.compress(&input, &mut out).unwrap();
            assert_eq!(&out[..6], b"prefix", "{codec} must append");
            let back = codec.decompress(out.freeze().slice(6..)).unwrap();
            assert_eq!(&back[..], &input[..], "{codec}");
        }
    }

    #[test]
    fn names_and_attribute_bits() {
        assert_eq!("GZIP".parse::<Compression>(), Ok(Compression::Gzip));
        assert!("brotli".parse::<Compression>().is_err());
        assert_eq!(
            Compression::from_attribute_bits(0x0c),
            Some(Compression::Zstd)
        );
        assert_eq!(Compression::from_attribute_bits(5), None);
        assert_eq!(Compression::Lz4.to_string(), "lz4");
    }

    #[test]
    fn garbage_does_not_decompress() {
        for codec in [Compression::Gzip, Compression::Lz4, Compression::Zstd] {
            assert!(codec
                .decompress(Bytes::from_static(b"not compressed"))
                .is_err());
        }
    }
}
