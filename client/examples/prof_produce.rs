// TEMPORARY profiling driver, not committed.
use client::{Acks, Client, ClientConfig, Producer, ProducerConfig, ProducerRecord};
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let record: usize = args[1].parse().unwrap();
    let batch: usize = args[2].parse().unwrap();
    let idem = args[3] == "all";
    let n: u64 = args[4].parse().unwrap();
    let client = Client::connect(ClientConfig::new("127.0.0.1:19092"))
        .await
        .unwrap();
    let topic = format!("prof-{}", std::process::id());
    client::Admin::new(client.clone())
        .create_topic(&client::NewTopic {
            configs: vec![("retention.bytes".into(), "536870912".into())],
            ..client::NewTopic::new(topic.clone(), 1)
        })
        .await
        .unwrap();
    let cfg = ProducerConfig {
        acks: if idem { Acks::All } else { Acks::Leader },
        enable_idempotence: idem,
        max_in_flight: if idem { 5 } else { 1 },
        batch_size: batch,
        linger: Duration::from_millis(50),
        buffer_memory: 64 << 20,
        ..ProducerConfig::default()
    };
    let value = vec![0x61u8; record];
    for round in 0..3 {
        let p = Producer::new(client.clone(), cfg.clone()).unwrap();
        let (u0, s0) = cpu();
        let t = Instant::now();
        for _ in 0..n {
            p.send(ProducerRecord::new(&topic).value(&value[..]))
                .await
                .unwrap();
        }
        p.flush().await;
        let s = t.elapsed().as_secs_f64();
        let (u1, s1) = cpu();
        eprintln!(
            "round {round}: {:.0} MiB/s {:.0} rec/s  user {:.0} sys {:.0} ns/rec",
            n as f64 * record as f64 / 1048576.0 / s,
            n as f64 / s,
            (u1 - u0) * 1e9 / n as f64,
            (s1 - s0) * 1e9 / n as f64
        );
    }
}

fn cpu() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    (
        f[11].parse::<f64>().unwrap() / 100.0,
        f[12].parse::<f64>().unwrap() / 100.0,
    )
}
