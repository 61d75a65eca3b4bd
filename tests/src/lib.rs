//! Helpers for the integration tests in `tests/tests/`: a broker started in-process on port 0, a
//! raw wire client that sends exactly the request and version a test names, and record batches.
//!
//! The raw client speaks through the `kafka-protocol` crate and nothing of ours but framing, so a
//! test sees the broker's bytes as any Kafka client would.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use protocol::frame::{finish_frame, read_frame, start_frame, DEFAULT_MAX_FRAME_BYTES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub use broker::{Broker, BrokerConfig};
pub use process::{workspace_binary, BrokerArgs, BrokerProcess};
pub use requests::*;
pub use without_api::WithoutApi;

mod process;
mod requests;
pub mod txn_race;
mod without_api;

/// A broker on `127.0.0.1:0` with `config`'s other settings.
pub async fn start_broker(config: BrokerConfig) -> Broker {
    let config = BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..config
    };
    Broker::start(config)
        .await
        .expect("broker starts on a free port")
}

/// An empty data directory of its own for `test` (removed first if a former run left it).
pub fn data_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("workshop-dd-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The default configuration with its data in `dir`.
pub fn data_dir_config(dir: &Path) -> BrokerConfig {
    BrokerConfig {
        data_dir: Some(dir.to_path_buf()),
        ..Default::default()
    }
}

/// A broker with the default configuration.
pub async fn broker() -> Broker {
    start_broker(BrokerConfig::default()).await
}

/// A connection that sends requests at explicit versions and reads the answers.
pub struct RawClient {
    stream: TcpStream,
    buffer: BytesMut,
    next_correlation_id: i32,
}

impl RawClient {
    pub async fn connect(addr: SocketAddr) -> Self {
        Self {
            stream: TcpStream::connect(addr)
                .await
                .expect("connect to the broker"),
            buffer: BytesMut::new(),
            next_correlation_id: 1,
        }
    }

    /// Sends `request` at `version` and returns the correlation id used.
    pub async fn send<R: Request>(&mut self, request: &R, version: i16) -> i32 {
        let (correlation_id, frame) = self.frame(request, version);
        self.send_bytes(&frame).await;
        correlation_id
    }

    /// The frame of `request` at `version` with the next correlation id, to send later
    /// ([`send_bytes`](Self::send_bytes)), for example several in one write.
    pub fn frame<R: Request>(&mut self, request: &R, version: i16) -> (i32, BytesMut) {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("raw-test")));
        let mut out = BytesMut::new();
        let at = start_frame(&mut out);
        header
            .encode(&mut out, R::header_version(version))
            .expect("encode header");
        request.encode(&mut out, version).expect("encode request");
        finish_frame(&mut out, at, 0).unwrap();
        (correlation_id, out)
    }

    /// Reads one response to a request of type `R` sent at `version`.
    pub async fn receive<R: Request>(&mut self, version: i16) -> (i32, R::Response) {
        let mut frame = self.next_frame().await.expect("a response frame").freeze();
        let header = kafka_protocol::messages::ResponseHeader::decode(
            &mut frame,
            R::Response::header_version(version),
        )
        .expect("decode response header");
        let body = R::Response::decode(&mut frame, version).expect("decode response body");
        (header.correlation_id, body)
    }

    /// Sends a request and reads its response, checking the correlation id.
    pub async fn call<R: Request>(&mut self, request: &R, version: i16) -> R::Response {
        let sent = self.send(request, version).await;
        let (received, response) = self.receive::<R>(version).await;
        assert_eq!(sent, received, "responses come back in request order");
        response
    }

    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .await
            .expect("write to the broker");
    }

    /// The next frame, or `None` when the broker closed the connection.
    pub async fn next_frame(&mut self) -> Option<BytesMut> {
        read_frame(&mut self.stream, &mut self.buffer, DEFAULT_MAX_FRAME_BYTES)
            .await
            .ok()
            .flatten()
    }

    /// True when the broker closes the connection without sending anything more.
    pub async fn closed_by_broker(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte).await, Ok(0) | Err(_))
    }
}

/// Sends one HTTP/1.1 request line (e.g. `GET /metrics`) and returns the whole response.
pub async fn http_get(addr: SocketAddr, request_line: &str) -> String {
    let mut stream = TcpStream::connect(addr)
        .await
        .expect("connect to the HTTP endpoint");
    let request = format!("{request_line} HTTP/1.1\r\nHost: {addr}\r\nAccept: */*\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("read the response");
    response
}

/// One record for [`batch`]: key, value, timestamp.
pub type TestRecord<'a> = (Option<&'a str>, &'a str, i64);

/// Encodes records as ONE v2 batch, as a non-idempotent producer would send it.
pub fn batch(records: &[TestRecord<'_>], compression: Compression) -> Bytes {
    encode_batch(records, compression, None)
}

/// An idempotent producer's identity on a batch: producer id, epoch, base sequence.
#[derive(Debug, Clone, Copy)]
pub struct ProducerStamp {
    pub id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
}

/// Records as ONE v2 batch stamped with an idempotent producer's id, epoch and sequences.
pub fn idempotent_batch(records: &[TestRecord<'_>], stamp: ProducerStamp) -> Bytes {
    encode_batch(records, Compression::None, Some(stamp))
}

fn encode_batch(
    records: &[TestRecord<'_>],
    compression: Compression,
    stamp: Option<ProducerStamp>,
) -> Bytes {
    let records: Vec<MaybeValue<'_>> = records.iter().map(|&(k, v, t)| (k, Some(v), t)).collect();
    records_batch(&records, compression, stamp, false)
}

/// One record for [`records_batch`]: key, value (`None`: a tombstone), timestamp.
pub type MaybeValue<'a> = (Option<&'a str>, Option<&'a str>, i64);

/// Records as ONE v2 batch, stamped with a producer's id, epoch and sequences when given, and
/// marked as part of a transaction when `transactional`. The crate's encoder starts a new batch
/// whenever `offset - sequence` changes, so record `i` gets offset `i` and sequence `base + i`
/// (or `i - 1` without a producer, for baseSequence -1).
pub fn records_batch(
    records: &[MaybeValue<'_>],
    compression: Compression,
    stamp: Option<ProducerStamp>,
    transactional: bool,
) -> Bytes {
    let (producer_id, producer_epoch, base_sequence) =
        stamp.map_or((-1, -1, -1), |s| (s.id, s.epoch, s.base_sequence));
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, &(key, value, timestamp))| Record {
            transactional,
            control: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            delete_horizon: false,
            offset: i as i64,
            sequence: base_sequence.wrapping_add(i as i32),
            timestamp,
            key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
            value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut out = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut out, &records, &options).expect("encode batch");
    out.freeze()
}

/// `n` uncompressed records with values `v0..`, no keys, timestamps 1000, 1001, ...
pub fn values(n: usize) -> Bytes {
    let values: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
    let records: Vec<TestRecord<'_>> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (None, v.as_str(), 1000 + i as i64))
        .collect();
    batch(&records, Compression::None)
}

/// Decodes fetched record data into `(offset, key, value)`.
pub fn decode_records(data: &Bytes) -> Vec<(i64, Option<String>, String)> {
    let mut data = data.clone();
    let batches = RecordBatchDecoder::decode_all(&mut data).expect("decode fetched batches");
    batches
        .into_iter()
        .flat_map(|b| b.records)
        .map(|r| {
            let text = |b: Bytes| String::from_utf8_lossy(&b).into_owned();
            (
                r.offset,
                r.key.map(text),
                r.value.map(text).unwrap_or_default(),
            )
        })
        .collect()
}

/// A v2 batch around `records` (the bytes after the header, compressed or not), with a header
/// that says whatever the caller says: what a hostile producer can send. The CRC is valid.
pub fn raw_batch(
    attributes: i16,
    last_offset_delta: i32,
    record_count: i32,
    records: &[u8],
) -> Bytes {
    let mut batch = BytesMut::new();
    batch.extend_from_slice(&0i64.to_be_bytes()); // base offset
    batch.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    batch.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
    batch.extend_from_slice(&[2]); // magic
    batch.extend_from_slice(&0u32.to_be_bytes()); // crc, below
    batch.extend_from_slice(&attributes.to_be_bytes());
    batch.extend_from_slice(&last_offset_delta.to_be_bytes());
    batch.extend_from_slice(&1000i64.to_be_bytes()); // base timestamp
    batch.extend_from_slice(&1000i64.to_be_bytes()); // max timestamp
    batch.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    batch.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    batch.extend_from_slice(&record_count.to_be_bytes());
    batch.extend_from_slice(records);
    let crc = protocol::batch::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch.freeze()
}

/// The smallest record there is (no key, no value, no headers, every delta 0): 7 bytes.
pub const TINY_RECORD: [u8; 7] = [12, 0, 0, 0, 1, 1, 0];

/// A gzip stream of `copies` times `chunk` that costs a few KiB per MiB it stands for, made
/// without compressing more than one chunk: the chunk is deflated once and ends on a full flush,
/// so its blocks refer to nothing before them and can be repeated as they are.
pub fn gzip_repeating(chunk: &[u8], copies: usize) -> Vec<u8> {
    use flate2::{Compress, Crc, FlushCompress};
    let mut deflate = Compress::new(flate2::Compression::best(), false);
    let mut blocks = Vec::with_capacity(chunk.len() / 2 + 1024);
    deflate
        .compress_vec(chunk, &mut blocks, FlushCompress::Full)
        .expect("deflate the chunk");
    assert_eq!(
        deflate.total_in() as usize,
        chunk.len(),
        "one call takes the chunk"
    );
    let crc_of = |data: &[u8]| {
        let mut crc = Crc::new();
        crc.update(data);
        crc
    };
    let (mut crc, one) = (crc_of(chunk), crc_of(chunk));
    let mut gzip = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    for i in 0..copies {
        gzip.extend_from_slice(&blocks);
        if i > 0 {
            crc.combine(&one);
        }
    }
    gzip.extend_from_slice(&[0x03, 0x00]); // an empty final block
    gzip.extend_from_slice(&crc.sum().to_le_bytes());
    gzip.extend_from_slice(&((chunk.len() * copies) as u32).to_le_bytes());
    gzip
}
