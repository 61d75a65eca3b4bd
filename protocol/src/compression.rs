//! Batch compression codecs, by the numbers Kafka puts in a batch's attributes, and decompression
//! that never produces more than its caller allows.
//!
//! A few hundred KiB of gzip or zstd can stand for gigabytes of records, so every decompression
//! here takes a limit: [`Compression::reader`] streams through a small window and fails past it,
//! [`Compression::decompress`] materialises at most that much. Compression comes from the
//! `kafka-protocol` crate (snappy in the xerial framing Java writes); decompression is done here
//! with the same codec libraries because the crate's decompressors have no bound.

use std::fmt;
use std::io::{self, Read, Write};
use std::str::FromStr;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};

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

/// Why a batch's records could not be decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecompressError {
    #[error("{codec} data decompresses to more than {limit} bytes")]
    TooLarge { codec: Compression, limit: usize },
    #[error("{codec} decompression failed: {reason}")]
    Corrupt { codec: Compression, reason: String },
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

    /// The codec of a batch's attributes; `None` for the unassigned codes 5 to 7.
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
    pub fn compress(self, input: &[u8], out: &mut BytesMut) -> Result<(), String> {
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

    /// Appends `input` compressed at a Kafka `compression.<codec>.level` (a topic's, when the
    /// broker recompresses into its `compression.type`): gzip's -1 is zlib's default; snappy
    /// has no level. The frames are those of [`Compression::compress`].
    pub fn compress_at(self, input: &[u8], level: i32, out: &mut BytesMut) -> Result<(), String> {
        let failed = |e: io::Error| format!("{} compression failed: {e}", self.name());
        let mut writer = out.writer();
        match self {
            Self::None | Self::Snappy => return self.compress(input, writer.into_inner()),
            Self::Gzip => {
                let level = u32::try_from(level)
                    .map_or_else(|_| flate2::Compression::default(), flate2::Compression::new);
                let mut encoder = flate2::write::GzEncoder::new(writer, level);
                encoder.write_all(input).map_err(failed)?;
                encoder.finish().map_err(failed)?;
            }
            Self::Lz4 => {
                let mut encoder = lz4::EncoderBuilder::new()
                    .level(u32::try_from(level).unwrap_or(0))
                    .block_mode(lz4::BlockMode::Independent)
                    .build(writer)
                    .map_err(failed)?;
                encoder.write_all(input).map_err(failed)?;
                encoder.finish().1.map_err(failed)?;
            }
            Self::Zstd => zstd::stream::copy_encode(input, &mut writer, level).map_err(failed)?,
        }
        Ok(())
    }

    /// A stream of `input` decompressed. It holds one codec window, never the whole output, and
    /// fails (with a [`DecompressError`] inside the `io::Error`) once it has produced `limit`
    /// bytes and more follow.
    pub fn reader<'a>(self, input: &'a [u8], limit: usize) -> Result<Limited<'a>, DecompressError> {
        let corrupt = |e: io::Error| DecompressError::Corrupt {
            codec: self,
            reason: e.to_string(),
        };
        let inner: Box<dyn Read + 'a> = match self {
            Self::None => Box::new(input),
            Self::Gzip => Box::new(flate2::read::GzDecoder::new(input)),
            Self::Snappy => Box::new(XerialSnappy::new(input, limit)),
            Self::Lz4 => Box::new(lz4::Decoder::new(input).map_err(corrupt)?),
            Self::Zstd => {
                Box::new(zstd::stream::read::Decoder::with_buffer(input).map_err(corrupt)?)
            }
        };
        Ok(Limited {
            inner,
            codec: self,
            left: limit,
            limit,
        })
    }

    /// `input` decompressed whole, if it fits `limit` bytes.
    pub fn decompress(self, input: Bytes, limit: usize) -> Result<Bytes, DecompressError> {
        if self == Self::None {
            return Ok(input);
        }
        let mut out = Vec::new();
        self.reader(&input, limit)?
            .read_to_end(&mut out)
            .map_err(|e| DecompressError::from_io(self, e))?;
        Ok(out.into())
    }
}

impl DecompressError {
    /// The error a [`Limited`] reader failed with.
    pub fn from_io(codec: Compression, e: io::Error) -> Self {
        match e.get_ref().and_then(|inner| inner.downcast_ref::<Self>()) {
            Some(ours) => ours.clone(),
            None => Self::Corrupt {
                codec,
                reason: e.to_string(),
            },
        }
    }
}

/// A decompressing stream that stops at its limit: see [`Compression::reader`].
pub struct Limited<'a> {
    inner: Box<dyn Read + 'a>,
    codec: Compression,
    left: usize,
    limit: usize,
}

impl Read for Limited<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            // At the limit: one more byte means the data is larger than allowed.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::other(DecompressError::TooLarge {
                    codec: self.codec,
                    limit: self.limit,
                })),
            };
        }
        let want = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n;
        Ok(n)
    }
}

/// Java's snappy framing (xerial): a 16-byte magic, then blocks of a big-endian length and a raw
/// snappy block. Without the magic the whole input is one raw block, as xerial's reader allows.
/// Each block's claimed size is checked against the limit before it is allocated.
struct XerialSnappy<'a> {
    input: &'a [u8],
    limit: usize,
    started: bool,
    block: Vec<u8>,
    at: usize,
}

const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

impl<'a> XerialSnappy<'a> {
    fn new(input: &'a [u8], limit: usize) -> Self {
        Self {
            input,
            limit,
            started: false,
            block: Vec::new(),
            at: 0,
        }
    }

    fn invalid(reason: &str) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, reason.to_string())
    }

    /// Decompresses the next block into `self.block`; false at the end of the input.
    fn next_block(&mut self) -> io::Result<bool> {
        let raw = if !self.started {
            self.started = true;
            if self.input.len() >= XERIAL_HEADER_LEN && self.input.starts_with(XERIAL_MAGIC) {
                self.input = &self.input[XERIAL_HEADER_LEN..];
                return self.next_block();
            }
            std::mem::take(&mut self.input)
        } else {
            if self.input.is_empty() {
                return Ok(false);
            }
            let Some((len, rest)) = self.input.split_first_chunk::<4>() else {
                return Err(Self::invalid("truncated snappy block length"));
            };
            let len = u32::from_be_bytes(*len) as usize;
            if rest.len() < len {
                return Err(Self::invalid("truncated snappy block"));
            }
            let (block, rest) = rest.split_at(len);
            self.input = rest;
            block
        };
        if raw.is_empty() {
            return Err(Self::invalid("empty snappy block"));
        }
        let size = snap::raw::decompress_len(raw).map_err(io::Error::other)?;
        if size > self.limit {
            // The whole stream may not exceed the limit either; say so before allocating.
            return Err(io::Error::other(DecompressError::TooLarge {
                codec: Compression::Snappy,
                limit: self.limit,
            }));
        }
        self.block.resize(size, 0);
        snap::raw::Decoder::new()
            .decompress(raw, &mut self.block)
            .map_err(io::Error::other)?;
        self.at = 0;
        Ok(true)
    }
}

impl Read for XerialSnappy<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
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

    fn compressed(codec: Compression, input: &[u8]) -> Bytes {
        let mut out = BytesMut::new();
        codec.compress(input, &mut out).unwrap();
        out.freeze()
    }

    #[test]
    fn every_codec_round_trips() {
        let input: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 97).to_le_bytes())
            .collect();
        for codec in Compression::ALL {
            let mut out = BytesMut::from(&b"prefix"[..]);
            codec.compress(&input, &mut out).unwrap();
            assert_eq!(&out[..6], b"prefix", "{codec} must append");
            let back = codec
                .decompress(out.freeze().slice(6..), input.len())
                .unwrap();
            assert_eq!(&back[..], &input[..], "{codec}");
        }
    }

    #[test]
    fn no_codec_produces_more_than_its_limit() {
        // 4 MiB of zeros: a few KiB compressed, refused at 1 MiB.
        let zeros = vec![0u8; 4 << 20];
        for codec in Compression::ALL.into_iter().skip(1) {
            let data = compressed(codec, &zeros);
            let refused = codec.decompress(data.clone(), 1 << 20).unwrap_err();
            assert_eq!(
                refused,
                DecompressError::TooLarge {
                    codec,
                    limit: 1 << 20
                },
                "{codec}"
            );
            assert_eq!(codec.decompress(data, 4 << 20).unwrap().len(), 4 << 20);
        }
    }

    #[test]
    fn a_raw_snappy_block_claiming_gigabytes_is_refused_before_allocating() {
        // A varint length of 2^32 - 1 and nothing behind it.
        let claim = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]);
        assert!(matches!(
            Compression::Snappy.decompress(claim, 1 << 20),
            Err(DecompressError::TooLarge { .. })
        ));
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
            assert!(matches!(
                codec.decompress(Bytes::from_static(b"not compressed"), 1 << 20),
                Err(DecompressError::Corrupt { .. })
            ));
        }
    }
}
