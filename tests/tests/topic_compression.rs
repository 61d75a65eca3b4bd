//! `compression.type` and `compression.<codec>.level` as Kafka's `LogValidator` applies them: a
//! batch sent in another codec than the topic's is stored recompressed into the topic's, at the
//! topic's level for that codec; with `producer` (the default), or in the topic's own codec, the
//! batch is stored as sent.

use std::io::Write;

use bytes::Bytes;
use kafka_protocol::records::Compression;
use protocol::batch::{BatchHeader, HEADER_LEN};
use tests::*;

fn values() -> Vec<String> {
    (0..40).map(|i| format!("record {i} ").repeat(8)).collect()
}

/// The records of [`values`] as one batch in `compression`.
fn sent(compression: Compression) -> Bytes {
    let values = values();
    let records: Vec<TestRecord<'_>> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (None, v.as_str(), 1000 + i as i64))
        .collect();
    batch(&records, compression)
}

/// The bytes after a batch's header: its records, compressed or not.
fn records_section(batch: &Bytes) -> Bytes {
    batch.slice(HEADER_LEN..)
}

fn gzip(input: &[u8], level: u32) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    encoder.write_all(input).unwrap();
    encoder.finish().unwrap()
}

fn zstd(input: &[u8], level: i32) -> Vec<u8> {
    zstd::encode_all(input, level).unwrap()
}

fn lz4(input: &[u8], level: u32) -> Vec<u8> {
    let mut encoder = lz4::EncoderBuilder::new()
        .level(level)
        .block_mode(lz4::BlockMode::Independent)
        .build(Vec::new())
        .unwrap();
    encoder.write_all(input).unwrap();
    let (out, finished) = encoder.finish();
    finished.unwrap();
    out
}

/// The one batch stored in partition 0: its codec bits, its records section, and the values
/// its records hold.
async fn stored(client: &mut RawClient, topic: &str) -> (i16, Bytes, Vec<String>) {
    let response = client.call(&fetch_request(topic, 0, 0, 0), 12).await;
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0, "{topic}");
    let data = partition.records.clone().unwrap_or_default();
    let header = BatchHeader::parse(&data).unwrap();
    assert_eq!(header.total_len(), data.len() as i64, "{topic}: one batch");
    assert_eq!(header.record_count, 40);
    let values = decode_records(&data).into_iter().map(|r| r.2).collect();
    (header.compression(), records_section(&data), values)
}

/// A topic, its configs, the codec sent, the codec stored, and the records section stored
/// (when the test can build it).
type Case<'a> = (
    &'a str,
    Vec<(&'a str, &'a str)>,
    Compression,
    i16,
    Option<Vec<u8>>,
);

#[tokio::test]
async fn compression_type_recompresses_batches_into_the_topics_codec_at_its_level() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let plain = records_section(&sent(Compression::None));
    let as_sent = |c| Some(records_section(&sent(c)).to_vec());
    // The levels must give different bytes, or the test could not tell them apart.
    assert_ne!(gzip(&plain, 1), gzip(&plain, 9));
    assert_ne!(zstd(&plain, 1), zstd(&plain, 19));
    assert_ne!(lz4(&plain, 1), lz4(&plain, 12));
    let cases: Vec<Case<'_>> = vec![
        (
            "gzip-1",
            vec![
                ("compression.type", "gzip"),
                ("compression.gzip.level", "1"),
            ],
            Compression::None,
            1,
            Some(gzip(&plain, 1)),
        ),
        (
            "gzip-9",
            vec![
                ("compression.type", "gzip"),
                ("compression.gzip.level", "9"),
            ],
            Compression::Lz4,
            1,
            Some(gzip(&plain, 9)),
        ),
        // -1, the default, is zlib's own default level, 6.
        (
            "gzip",
            vec![("compression.type", "gzip")],
            Compression::None,
            1,
            Some(gzip(&plain, 6)),
        ),
        (
            "zstd-1",
            vec![
                ("compression.type", "zstd"),
                ("compression.zstd.level", "1"),
            ],
            Compression::None,
            4,
            Some(zstd(&plain, 1)),
        ),
        (
            "zstd-19",
            vec![
                ("compression.type", "zstd"),
                ("compression.zstd.level", "19"),
            ],
            Compression::Gzip,
            4,
            Some(zstd(&plain, 19)),
        ),
        (
            "zstd",
            vec![("compression.type", "zstd")],
            Compression::None,
            4,
            Some(zstd(&plain, 3)),
        ),
        (
            "lz4-1",
            vec![("compression.type", "lz4"), ("compression.lz4.level", "1")],
            Compression::None,
            3,
            Some(lz4(&plain, 1)),
        ),
        (
            "lz4-12",
            vec![("compression.type", "lz4"), ("compression.lz4.level", "12")],
            Compression::Snappy,
            3,
            Some(lz4(&plain, 12)),
        ),
        (
            "lz4",
            vec![("compression.type", "lz4")],
            Compression::None,
            3,
            Some(lz4(&plain, 9)),
        ),
        (
            "snappy",
            vec![("compression.type", "snappy")],
            Compression::Zstd,
            2,
            None,
        ),
        (
            "uncompressed",
            vec![("compression.type", "uncompressed")],
            Compression::Gzip,
            0,
            Some(plain.to_vec()),
        ),
        // The topic's codec already: stored as sent, at the producer's level.
        (
            "same",
            vec![
                ("compression.type", "gzip"),
                ("compression.gzip.level", "1"),
            ],
            Compression::Gzip,
            1,
            as_sent(Compression::Gzip),
        ),
        (
            "producer",
            vec![],
            Compression::Lz4,
            3,
            as_sent(Compression::Lz4),
        ),
    ];
    for (topic, configs, compression, codec, section) in cases {
        assert_eq!(
            create_topic_with(&mut client, topic, &configs)
                .await
                .error_code,
            0
        );
        let answer = produce(&mut client, topic, 0, sent(compression), 9).await;
        assert_eq!((answer.error_code, answer.base_offset), (0, 0), "{topic}");
        let (stored_codec, stored_section, stored_values) = stored(&mut client, topic).await;
        assert_eq!(stored_codec, codec, "{topic}");
        if let Some(section) = section {
            assert!(stored_section == section, "{topic}: records section");
        }
        assert_eq!(stored_values, values(), "{topic}");
    }
}

/// Kafka checks the batch's size against `max.message.bytes` again once it has recompressed it
/// (`UnifiedLog.append`, `RecordTooLargeException`): a batch that fits as sent, but not in the
/// topic's codec, is MESSAGE_TOO_LARGE and nothing is stored.
#[tokio::test]
async fn a_batch_past_max_message_bytes_once_recompressed_is_too_large() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let zstd_batch = sent(Compression::Zstd);
    let plain_len = sent(Compression::None).len();
    assert!(
        zstd_batch.len() < 1000 && plain_len > 1000,
        "{} {plain_len}",
        zstd_batch.len()
    );
    let configs = [
        ("compression.type", "uncompressed"),
        ("max.message.bytes", "1000"),
    ];
    assert_eq!(
        create_topic_with(&mut client, "t", &configs)
            .await
            .error_code,
        0
    );
    let answer = produce(&mut client, "t", 0, zstd_batch, 9).await;
    assert_eq!(
        answer.error_code,
        kafka_protocol::ResponseError::MessageTooLarge.code()
    );
    assert_eq!(list_offset(&mut client, "t", 0, -1).await.2, 0);
}
