//! A segment file of arbitrary bytes is recovered without a panic and without refusing the start,
//! and what recovery serves is whole, CRC-valid batches whose offsets only grow.
#![no_main]

use std::io::Write;

use broker::topics::{StorageConfig, Topics};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // One data dir per fuzzing process, rewritten for each input (recovery may quarantine it).
    let dir = std::env::temp_dir().join(format!("fuzz-recovery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let topic = dir.join("t");
    std::fs::create_dir_all(&topic).unwrap();
    std::fs::write(
        topic.join("topic.meta"),
        "id=6f1c1b8e-8a2e-4d55-9a56-0d1f7c2b9e31\npartitions=1\n",
    )
    .unwrap();
    std::fs::File::create(topic.join("0-00000000000000000000.log"))
        .unwrap()
        .write_all(data)
        .unwrap();
    let storage = StorageConfig {
        max_open_files: Some(4),
        segment_bytes: 1 << 20,
    };
    let topics = Topics::open(&dir, storage).expect("recovery never refuses to start");
    let Some(log) = topics.get("t").and_then(|t| t.partition(0)) else {
        return; // quarantined
    };
    let offsets = log.offsets();
    assert!(0 <= offsets.start && offsets.start <= offsets.end);
    let read = log.read(offsets.start, usize::MAX, true).unwrap();
    let kept: usize = read.records.iter().map(|b| b.len()).sum();
    assert!(kept <= data.len());
    let mut next = offsets.start;
    for batch in &read.records {
        let header = protocol::batch::validate_single_batch(batch).expect("recovery keeps valid batches");
        assert!(header.base_offset >= next, "offsets only grow");
        next = header.last_offset() + 1;
    }
    assert!(next <= offsets.end);
});
