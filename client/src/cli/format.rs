//! kcat-style output formats for `consume --format`: `%t` topic, `%p` partition, `%o` offset,
//! `%k` key, `%K` key length, `%s` value, `%S` value length, `%T` timestamp (ms), `%h` headers
//! as `k=v,k2=v2`, `%%` a percent sign; `\n`, `\t`, `\r`, `\\` escapes. As in kcat, nothing is
//! added at the end: put `\n` in the format. And kcat's `-J`: one JSON envelope per line.

use std::io::{self, Write};

use client::Record;

/// The format used without `--format`: one readable line per record.
pub const DEFAULT: &str = "%t/%p@%o key=%k value=%s\\n";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Key,
    KeyLen,
    Value,
    ValueLen,
    Timestamp,
    Headers,
    /// kcat -J's envelope.
    Envelope,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pieces: Vec<Piece>,
    /// What a null key or value prints as.
    null: &'static [u8],
}

impl Format {
    /// The default format, where null keys and values read `(null)`.
    pub fn default_format() -> Self {
        let mut f = Self::parse(DEFAULT).expect("the default format parses");
        f.null = b"(null)";
        f
    }

    /// kcat's `-J`: `{"topic","partition","offset","tstype","ts","broker","headers","key",
    /// "payload"}` and a newline. `headers` (name, value, name, value...) only when the record
    /// has some; `broker` is -1 as from kcat on librdkafka before 1.5, which did not say which
    /// broker a record came from; `tstype` is "create", the broker's only timestamp type.
    pub fn kcat_json() -> Self {
        Self {
            pieces: vec![Piece::Envelope, Piece::Text(b"\n".to_vec())],
            null: b"",
        }
    }

    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut text = Vec::new();
        let mut chars = spec.chars();
        while let Some(c) = chars.next() {
            let piece = match c {
                '%' => match chars.next() {
                    Some('t') => Piece::Topic,
                    Some('p') => Piece::Partition,
                    Some('o') => Piece::Offset,
                    Some('k') => Piece::Key,
                    Some('K') => Piece::KeyLen,
                    Some('s') => Piece::Value,
                    Some('S') => Piece::ValueLen,
                    Some('T') => Piece::Timestamp,
                    Some('h') => Piece::Headers,
                    Some('%') => {
                        text.push(b'%');
                        continue;
                    }
                    Some(other) => {
                        return Err(format!(
                            "unknown placeholder %{other} in --format: use %t %p %o %k %K %s %S %T %h or %%"
                        ))
                    }
                    None => return Err("--format ends with a lone %".to_string()),
                },
                '\\' => {
                    let escaped = match chars.next() {
                        Some('n') => '\n',
                        Some('t') => '\t',
                        Some('r') => '\r',
                        Some('\\') => '\\',
                        Some(other) => {
                            text.push(b'\\');
                            other
                        }
                        None => '\\',
                    };
                    let mut buf = [0; 4];
                    text.extend_from_slice(escaped.encode_utf8(&mut buf).as_bytes());
                    continue;
                }
                other => {
                    let mut buf = [0; 4];
                    text.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                    continue;
                }
            };
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(piece);
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Self { pieces, null: b"" })
    }

    /// Writes one record; bytes of keys and values go out as they are.
    pub fn write(
        &self,
        out: &mut impl Write,
        topic: &str,
        partition: i32,
        record: &Record,
    ) -> io::Result<()> {
        let len = |b: &Option<bytes::Bytes>| b.as_ref().map_or(-1, |b| b.len() as i64);
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.write_all(t)?,
                Piece::Topic => out.write_all(topic.as_bytes())?,
                Piece::Partition => write!(out, "{partition}")?,
                Piece::Offset => write!(out, "{}", record.offset)?,
                Piece::Key => out.write_all(record.key.as_deref().unwrap_or(self.null))?,
                Piece::KeyLen => write!(out, "{}", len(&record.key))?,
                Piece::Value => out.write_all(record.value.as_deref().unwrap_or(self.null))?,
                Piece::ValueLen => write!(out, "{}", len(&record.value))?,
                Piece::Timestamp => write!(out, "{}", record.timestamp)?,
                Piece::Envelope => {
                    serde_json::to_writer(&mut *out, &envelope(topic, partition, record))?
                }
                Piece::Headers => {
                    for (i, h) in record.headers().enumerate() {
                        if i > 0 {
                            out.write_all(b",")?;
                        }
                        out.write_all(&h.key)?;
                        out.write_all(b"=")?;
                        out.write_all(h.value.as_deref().unwrap_or(self.null))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The kcat -J document of one record, its fields in kcat's order; keys, values and headers as
/// text (invalid UTF-8 replaced).
#[derive(serde::Serialize)]
struct Envelope<'a> {
    topic: &'a str,
    partition: i32,
    offset: i64,
    tstype: &'static str,
    ts: i64,
    broker: i32,
    /// Name, value, name, value...
    #[serde(skip_serializing_if = "Option::is_none")]
    headers: Option<Vec<Option<String>>>,
    key: Option<String>,
    payload: Option<String>,
}

fn envelope<'a>(topic: &'a str, partition: i32, record: &Record) -> Envelope<'a> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let headers = (record.header_count() > 0).then(|| {
        record
            .headers()
            .flat_map(|h| [Some(text(&h.key)), h.value.as_deref().map(text)])
            .collect()
    });
    Envelope {
        topic,
        partition,
        offset: record.offset,
        tstype: "create",
        ts: record.timestamp,
        broker: -1,
        headers,
        key: record.key.as_deref().map(text),
        payload: record.value.as_deref().map(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::record::{BatchBuilder, Compression, FetchedBatch, Header, ProducerIdentity};

    fn record(key: Option<&[u8]>, headers: &[Header<'_>]) -> Record {
        let mut b = BatchBuilder::new(1024);
        assert!(b.try_append(1_700_000_000_123, key, Some(b"paid"), headers));
        let batch = b.finish(Compression::None, ProducerIdentity::NONE).unwrap();
        let batches = FetchedBatch::split(batch, "t", 0).unwrap();
        batches[0].records().unwrap().next().unwrap().unwrap()
    }

    fn render(format: &Format, rec: &Record) -> String {
        let mut out = Vec::new();
        format.write(&mut out, "orders", 4, rec).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn kcat_placeholders() {
        let headers = [
            Header {
                key: "a",
                value: Some(b"1"),
            },
            Header {
                key: "b",
                value: None,
            },
        ];
        let rec = record(Some(b"order-8842"), &headers);
        let f = Format::parse("%t|%p|%o|%k|%K|%s|%S|%T|%h|100%%\\n").unwrap();
        assert_eq!(
            render(&f, &rec),
            "orders|4|0|order-8842|10|paid|4|1700000000123|a=1,b=|100%\n"
        );
    }

    #[test]
    fn kcat_json_envelopes() {
        let headers = [
            Header {
                key: "seq",
                value: Some(b"7"),
            },
            Header {
                key: "trace",
                value: None,
            },
        ];
        assert_eq!(
            render(&Format::kcat_json(), &record(Some(b"k"), &headers)),
            "{\"topic\":\"orders\",\"partition\":4,\"offset\":0,\"tstype\":\"create\",\
             \"ts\":1700000000123,\"broker\":-1,\"headers\":[\"seq\",\"7\",\"trace\",null],\
             \"key\":\"k\",\"payload\":\"paid\"}\n"
        );
        assert_eq!(
            render(&Format::kcat_json(), &record(None, &[])),
            "{\"topic\":\"orders\",\"partition\":4,\"offset\":0,\"tstype\":\"create\",\
             \"ts\":1700000000123,\"broker\":-1,\"key\":null,\"payload\":\"paid\"}\n"
        );
    }

    #[test]
    fn the_default_is_readable_and_shows_nulls() {
        let rec = record(None, &[]);
        assert_eq!(
            render(&Format::default_format(), &rec),
            "orders/4@0 key=(null) value=paid\n"
        );
        let f = Format::parse("%k|%K\\t").unwrap();
        assert_eq!(render(&f, &rec), "|-1\t");
    }

    #[test]
    fn bad_formats_say_what_is_wrong() {
        assert!(Format::parse("%x").unwrap_err().contains("%x"));
        assert!(Format::parse("50%").is_err());
        assert_eq!(
            Format::parse("a\\qb").unwrap(),
            Format::parse("a\\qb").unwrap()
        );
        let rec = record(None, &[]);
        assert_eq!(render(&Format::parse("é\\q").unwrap(), &rec), "é\\q");
    }
}
