//! One record inside a v2 batch: zigzag varints and length-prefixed fields (Kafka's
//! `DefaultRecord`). Written straight into the batch buffer and read straight out of fetched
//! bytes, so neither direction builds an intermediate record value.
//!
//! ```text
//! length varint | attributes i8 | timestampDelta varlong | offsetDelta varint
//! keyLength varint | key | valueLength varint | value
//! headerCount varint | (keyLength varint | key | valueLength varint | value)*
//! ```

use bytes::{BufMut, Bytes, BytesMut};

/// A header of a record being produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    pub key: &'a str,
    pub value: Option<&'a [u8]>,
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(crate) fn varint_len(v: i64) -> usize {
    let bits = 64 - (zigzag(v) | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

pub(crate) fn put_varint(buf: &mut BytesMut, v: i64) {
    protocol::records::put_zigzag(buf, v);
}

fn opt_len(bytes: Option<&[u8]>) -> usize {
    match bytes {
        None => varint_len(-1),
        Some(b) => varint_len(b.len() as i64) + b.len(),
    }
}

fn put_opt(buf: &mut BytesMut, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, b.len() as i64);
            buf.put_slice(b);
        }
    }
}

/// A record's fields as the producer hands them over, borrowed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordFields<'a> {
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [Header<'a>],
}

impl RecordFields<'_> {
    fn body_len(&self) -> usize {
        1 + varint_len(self.timestamp_delta)
            + varint_len(self.offset_delta as i64)
            + opt_len(self.key)
            + opt_len(self.value)
            + varint_len(self.headers.len() as i64)
            + self
                .headers
                .iter()
                .map(|h| opt_len(Some(h.key.as_bytes())) + opt_len(h.value))
                .sum::<usize>()
    }

    /// Bytes the record takes in a batch, length prefix included.
    pub fn encoded_len(&self) -> usize {
        let body = self.body_len();
        varint_len(body as i64) + body
    }

    pub fn encode(&self, buf: &mut BytesMut) {
        put_varint(buf, self.body_len() as i64);
        buf.put_i8(0); // record attributes: unused by Kafka
        put_varint(buf, self.timestamp_delta);
        put_varint(buf, self.offset_delta as i64);
        put_opt(buf, self.key);
        put_opt(buf, self.value);
        put_varint(buf, self.headers.len() as i64);
        for h in self.headers {
            put_opt(buf, Some(h.key.as_bytes()));
            put_opt(buf, h.value);
        }
    }
}

/// An upper bound of the bytes a record takes in a batch, before its deltas are known.
pub(crate) fn estimated_record_size(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header<'_>],
) -> usize {
    RecordFields {
        timestamp_delta: i64::MAX,
        offset_delta: i32::MAX,
        key,
        value,
        headers,
    }
    .encoded_len()
}

/// A consumed record. Key, value and headers share the fetched buffer; nothing is copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    headers: Bytes,
    header_count: usize,
}

/// A consumed header. Kafka allows the same key twice; both are kept, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

impl Record {
    pub fn headers(&self) -> impl Iterator<Item = RecordHeader> + '_ {
        let mut reader = Reader::new(self.headers.clone());
        // Walked once while decoding, so these reads cannot fail.
        (0..self.header_count).filter_map(move |_| {
            let key = reader.bytes().ok()??;
            let value = reader.bytes().ok()?;
            Some(RecordHeader { key, value })
        })
    }

    pub fn header_count(&self) -> usize {
        self.header_count
    }
}

/// Reads fields off a buffer, failing (never panicking) when the buffer runs out.
pub(crate) struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn varint(&mut self) -> Result<i64, String> {
        let mut z: u64 = 0;
        for i in 0..10 {
            let byte = *self
                .buf
                .get(self.pos)
                .ok_or("varint cut off by the end of the data")?;
            self.pos += 1;
            z |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
            }
        }
        Err("varint longer than 10 bytes".into())
    }

    fn length(&mut self) -> Result<Option<usize>, String> {
        match self.varint()? {
            -1 => Ok(None),
            n if n < -1 => Err(format!("negative length {n}")),
            n => Ok(Some(n as usize)),
        }
    }

    fn take(&mut self, len: usize) -> Result<Bytes, String> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|end| *end <= self.buf.len())
            .ok_or_else(|| format!("{len} bytes announced, {} left", self.buf.len() - self.pos))?;
        let out = self.buf.slice(self.pos..end);
        self.pos = end;
        Ok(out)
    }

    /// A nullable length-prefixed byte string.
    pub fn bytes(&mut self) -> Result<Option<Bytes>, String> {
        self.length()?.map(|len| self.take(len)).transpose()
    }

    fn i8(&mut self) -> Result<i8, String> {
        Ok(self.take(1)?[0] as i8)
    }

    /// The next record of a batch whose first offset and timestamp are given.
    pub fn record(&mut self, base_offset: i64, base_timestamp: i64) -> Result<Record, String> {
        let len = self.length()?.ok_or("null record length")?;
        let mut r = Reader::new(self.take(len)?);
        let _attributes = r.i8()?;
        let timestamp_delta = r.varint()?;
        let offset_delta = r.varint()?;
        let key = r.bytes()?;
        let value = r.bytes()?;
        let header_count = r.length()?.ok_or("null header count")?;
        let headers_start = r.pos;
        for _ in 0..header_count {
            r.bytes()?.ok_or("null header key")?;
            r.bytes()?;
        }
        if !r.is_empty() {
            return Err(format!(
                "{} bytes after the record's last field",
                r.buf.len() - r.pos
            ));
        }
        Ok(Record {
            offset: base_offset.wrapping_add(offset_delta),
            timestamp: base_timestamp.wrapping_add(timestamp_delta),
            key,
            value,
            headers: r.buf.slice(headers_start..),
            header_count,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_lengths_and_round_trips() {
        for (v, len) in [
            (0i64, 1),
            (-1, 1),
            (63, 1),
            (64, 2),
            (-65, 2),
            (i32::MAX as i64, 5),
            (i64::MIN, 10),
        ] {
            assert_eq!(varint_len(v), len, "{v}");
            let mut buf = BytesMut::new();
            put_varint(&mut buf, v);
            assert_eq!(buf.len(), len);
            assert_eq!(Reader::new(buf.freeze()).varint(), Ok(v));
        }
    }

    #[test]
    fn a_record_round_trips_with_duplicate_headers() {
        let headers = [
            Header {
                key: "trace",
                value: Some(b"a"),
            },
            Header {
                key: "trace",
                value: None,
            },
        ];
        let fields = RecordFields {
            timestamp_delta: -5,
            offset_delta: 3,
            key: Some(b"k"),
            value: None,
            headers: &headers,
        };
        let mut buf = BytesMut::new();
        fields.encode(&mut buf);
        assert_eq!(buf.len(), fields.encoded_len());
        let rec = Reader::new(buf.freeze()).record(100, 1000).unwrap();
        assert_eq!(rec.offset, 103);
        assert_eq!(rec.timestamp, 995);
        assert_eq!(rec.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(rec.value, None);
        let hs: Vec<RecordHeader> = rec.headers().collect();
        assert_eq!(hs.len(), 2);
        assert_eq!(&hs[0].key[..], b"trace");
        assert_eq!(hs[0].value.as_deref(), Some(&b"a"[..]));
        assert_eq!(hs[1].value, None);
    }

    #[test]
    fn truncated_or_lying_records_are_errors() {
        let fields = RecordFields {
            timestamp_delta: 0,
            offset_delta: 0,
            key: Some(b"key"),
            value: Some(b"value"),
            headers: &[],
        };
        let mut buf = BytesMut::new();
        fields.encode(&mut buf);
        let full = buf.freeze();
        for cut in 0..full.len() {
            assert!(
                Reader::new(full.slice(..cut)).record(0, 0).is_err(),
                "{cut}"
            );
        }
        // A key length far beyond the data.
        let mut evil = BytesMut::new();
        put_varint(&mut evil, 4);
        evil.put_slice(&[0, 0, 0]);
        put_varint(&mut evil, i32::MAX as i64);
        assert!(Reader::new(evil.freeze()).record(0, 0).is_err());
        assert!(Reader::new(Bytes::from_static(&[0xff; 11]))
            .varint()
            .is_err());
    }
}
