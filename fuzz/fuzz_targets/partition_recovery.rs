//! A partition file of arbitrary bytes is recovered without a panic, and what recovery keeps is
//! whole, CRC-valid batches whose offsets only grow.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // One file per fuzzing process, rewritten for each input (in memory on Linux's /dev/shm).
    let dir = std::env::temp_dir().join(format!("fuzz-recovery-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("0.log");
    std::fs::File::create(&path).unwrap().write_all(data).unwrap();
    if let Ok(log) = broker::log::PartitionLog::recover(&path) {
        let offsets = log.offsets();
        assert!(offsets.start <= offsets.end);
        let read = log.read(offsets.start, usize::MAX, true).unwrap();
        let kept: usize = read.records.iter().map(|b| b.len()).sum();
        assert!(kept <= data.len());
        for batch in &read.records {
            protocol::batch::validate_single_batch(batch).expect("recovery keeps valid batches");
        }
    }
});
