//! The client half of the raw probes: the same traffic shapes the broker cases produce (frames
//! acknowledged one at a time or with a window of 5, 1 MiB fetches, 64-byte round trips), with
//! no protocol work at all. Each probe is bounded by a count and a deadline.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::server::{ECHO, MAX_FRAME, MODE_ECHO, MODE_FETCH, MODE_SINK};
use crate::bench::stats::Latency;

/// Bytes moved and how long it took.
#[derive(Debug, Clone, Copy)]
pub struct Moved {
    pub bytes: u64,
    pub frames: u64,
    pub elapsed: Duration,
}

impl Moved {
    pub fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / (1u64 << 20) as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

async fn open(addr: SocketAddr, mode: u8) -> std::io::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    stream.write_all(&[mode]).await?;
    Ok(stream)
}

fn frame_too_large(frame: usize) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("frame of {frame} bytes is above the raw server's {MAX_FRAME}-byte cap"),
    )
}

/// Sends `total` bytes in frames of `frame` bytes with up to `window` unacknowledged, as a
/// producer with `window` requests in flight does; stops early at `deadline`.
pub async fn sink(
    addr: SocketAddr,
    frame: usize,
    total: u64,
    window: usize,
    deadline: Duration,
) -> std::io::Result<Moved> {
    if frame > MAX_FRAME || frame == 0 {
        return Err(frame_too_large(frame));
    }
    let mut stream = open(addr, MODE_SINK).await?;
    // Size prefix and payload in one buffer, so each frame is one write, as a request is.
    let mut message = Vec::with_capacity(4 + frame);
    message.extend_from_slice(&(frame as u32).to_be_bytes());
    message.resize(4 + frame, 0x5a);
    let frames = (total / frame as u64).max(1);
    let window = window.max(1) as u64;
    let started = Instant::now();
    let (mut sent, mut acked) = (0u64, 0u64);
    let mut ack = [0u8; 8];
    while acked < frames {
        while sent < frames && sent - acked < window && started.elapsed() < deadline {
            stream.write_all(&message).await?;
            sent += 1;
        }
        if acked == sent {
            break;
        }
        stream.read_exact(&mut ack).await?;
        acked += 1;
    }
    Ok(Moved {
        bytes: acked * frame as u64,
        frames: acked,
        elapsed: started.elapsed(),
    })
}

/// Asks for `frame` bytes at a time, one request in flight, until `total` bytes or `deadline`.
pub async fn fetch(
    addr: SocketAddr,
    frame: usize,
    total: u64,
    deadline: Duration,
) -> std::io::Result<Moved> {
    if frame > MAX_FRAME || frame == 0 {
        return Err(frame_too_large(frame));
    }
    let mut stream = open(addr, MODE_FETCH).await?;
    let mut buf = vec![0u8; 4 + frame];
    let request = (frame as u32).to_be_bytes();
    // One untimed request first: the server fills its log on first use.
    stream.write_all(&request).await?;
    stream.read_exact(&mut buf).await?;
    let frames = (total / frame as u64).max(1);
    let started = Instant::now();
    let mut done = 0u64;
    while done < frames && started.elapsed() < deadline {
        stream.write_all(&request).await?;
        stream.read_exact(&mut buf).await?;
        done += 1;
    }
    Ok(Moved {
        bytes: done * frame as u64,
        frames: done,
        elapsed: started.elapsed(),
    })
}

/// Round trips of 64 bytes, one at a time, recording each one's time.
pub async fn ping_pong(
    addr: SocketAddr,
    count: u64,
    deadline: Duration,
) -> std::io::Result<(Latency, Duration)> {
    let mut stream = open(addr, MODE_ECHO).await?;
    let mut buf = [0x42u8; ECHO];
    for _ in 0..100 {
        stream.write_all(&buf).await?;
        stream.read_exact(&mut buf).await?;
    }
    let mut latency = Latency::new();
    let started = Instant::now();
    for _ in 0..count {
        if started.elapsed() >= deadline {
            break;
        }
        let sent = Instant::now();
        stream.write_all(&buf).await?;
        stream.read_exact(&mut buf).await?;
        latency.record(sent.elapsed());
    }
    Ok((latency, started.elapsed()))
}

/// One echo round trip on an open connection: the raw server's readiness check.
pub async fn echo_once(stream: &mut TcpStream) -> std::io::Result<()> {
    stream.write_all(&[MODE_ECHO]).await?;
    let mut buf = [0u8; ECHO];
    stream.write_all(&buf).await?;
    stream.read_exact(&mut buf).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::server::serve_in_process;
    use super::*;

    #[tokio::test]
    async fn every_probe_moves_what_it_says() {
        let addr = serve_in_process().await;
        let long = Duration::from_secs(30);
        let moved = sink(addr, 4096, 64 * 4096, 5, long).await.unwrap();
        assert_eq!((moved.frames, moved.bytes), (64, 64 * 4096));
        let moved = sink(addr, 1000, 10_000, 1, long).await.unwrap();
        assert_eq!(moved.frames, 10);
        let moved = fetch(addr, 1 << 16, 8 << 16, long).await.unwrap();
        assert_eq!(moved.frames, 8);
        let (latency, _) = ping_pong(addr, 50, long).await.unwrap();
        assert_eq!(latency.count(), 50);
        assert!(sink(addr, MAX_FRAME + 1, 1, 1, long).await.is_err());
    }

    #[tokio::test]
    async fn a_passed_deadline_stops_a_probe_early() {
        let addr = serve_in_process().await;
        let moved = sink(addr, 4096, 1 << 30, 5, Duration::ZERO).await.unwrap();
        assert_eq!(moved.frames, 0);
        let moved = fetch(addr, 4096, 1 << 30, Duration::ZERO).await.unwrap();
        assert_eq!(moved.frames, 0);
    }
}
