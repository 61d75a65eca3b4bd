//! Any request frame through the broker's handlers, with the state they share (topics, groups,
//! producer ids) carried from one input to the next: no input may panic the broker, and every
//! answer is a well-formed frame. A paused clock lets parked fetches and joins end at once.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;

struct Harness {
    runtime: tokio::runtime::Runtime,
    broker: broker::Broker,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let config = broker::BrokerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            auto_create_topics: true,
            default_partitions: 3,
            // Enough to create and grow topics, not enough to swap.
            max_partitions: 2_000,
            max_uncompressed_batch_bytes: 1 << 20,
            ..Default::default()
        };
        let broker = runtime.block_on(broker::Broker::start(config)).unwrap();
        Harness { runtime, broker }
    })
}

fuzz_target!(|data: &[u8]| {
    let h = harness();
    let frame = bytes::Bytes::copy_from_slice(data);
    let answer = h.runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(3600), h.broker.handle_frame(frame)).await
    });
    if let Ok(Some(wire)) = answer {
        let size = i32::from_be_bytes(wire[..4].try_into().unwrap());
        assert_eq!(size as usize, wire.len() - 4, "the size prefix tells the truth");
    }
});
