//! What the broker does with a produced batch before it appends it: header, CRC, and the walk of
//! its records, compressed or not, within a decompression limit; and the timestamp lookup walk.
//! Neither may panic, nor decompress past the limit, whatever the bytes. The CRC is recomputed
//! for the fuzzer's bytes, so the checks behind it are reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::batch::{crc32c, validate_single_batch, HEADER_LEN};
use protocol::compression::{Compression, DecompressError};
use protocol::records::{check_records, first_at_or_after, RecordsError};

const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let mut batch = data.to_vec();
    if batch.len() >= HEADER_LEN {
        let len = (batch.len() - 12) as i32;
        batch[8..12].copy_from_slice(&len.to_be_bytes());
        batch[16] = 2;
        let crc = crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    let Ok(header) = validate_single_batch(&batch) else {
        return;
    };
    let checked = check_records(&batch, &header, LIMIT);
    if let Some(codec) = Compression::from_attribute_bits(header.attributes) {
        // The walk refuses for size exactly what does not decompress within the limit.
        let whole = codec.decompress(batch[HEADER_LEN..].to_vec().into(), LIMIT);
        let walk_too_large = matches!(
            checked,
            Err(RecordsError::Decompress(DecompressError::TooLarge { .. }))
        );
        if let Ok(body) = &whole {
            assert!(codec == Compression::None || body.len() <= LIMIT);
            assert!(!walk_too_large, "walked past a limit the data fits");
        }
    }
    for target in [i64::MIN, -1, 0, header.base_timestamp, header.max_timestamp, i64::MAX] {
        let _ = first_at_or_after(&batch, &header, target, LIMIT);
    }
});
