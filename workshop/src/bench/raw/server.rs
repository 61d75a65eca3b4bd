//! The raw loopback server (`workshop bench --serve-raw`): the probes of performance.md
//! Appendix B with nothing of Kafka in them, so that what they reach is what this machine,
//! tokio and loopback TCP allow for the same traffic shape.
//!
//! A connection opens with one mode byte:
//! - `S` sink: `[u32 size][payload]` frames, each read, appended to a log of recycled 64 MiB
//!   segments (pre-faulted memory, the "pooled" mode of B.4), and acknowledged with 8 bytes;
//! - `F` fetch: a `u32` size asks for that many bytes of a pre-filled in-memory log, answered
//!   as `[u32 size][bytes]` in one vectored write;
//! - `E` echo: 64-byte messages sent straight back.
//!
//! Sizes are checked against caps before anything is allocated, and a bad mode or size closes
//! the connection: a stray client cannot make the server allocate or panic.

use std::io::IoSlice;
use std::sync::{Mutex, OnceLock};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A log segment: large enough that a 1 MiB frame rarely straddles one.
const SEGMENT: usize = 64 << 20;
/// Segments one sink connection may hold before it reuses its oldest: bounds memory at 512 MiB
/// whatever the client sends.
const MAX_SEGMENTS: usize = 8;
/// The largest sink frame or fetch answer accepted.
pub const MAX_FRAME: usize = 16 << 20;
/// The fetch log: larger than the 32 MiB L3 cache, so fetches read memory, not cache.
const FETCH_LOG: usize = 128 << 20;
/// Echo message size (B.5's 64-byte ping-pong).
pub const ECHO: usize = 64;

pub const MODE_SINK: u8 = b'S';
pub const MODE_FETCH: u8 = b'F';
pub const MODE_ECHO: u8 = b'E';

/// Segments handed back by finished sink connections, already faulted in: the next run appends
/// to warm memory, as a broker that recycles its segments would.
static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
static FETCH: OnceLock<Vec<u8>> = OnceLock::new();

/// Serves until stdin closes (the bench that started us is gone) or the process is killed.
/// Prints `raw listening on ADDR` once bound: the one stdout line, as the broker prints its own.
pub fn serve() -> std::io::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "raw listening on {}", listener.local_addr()?)?;
        stdout.flush()?;
        drop(stdout);
        std::thread::spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            std::process::exit(0);
        });
        loop {
            let (stream, _) = listener.accept().await?;
            tokio::spawn(async move {
                let _ = connection(stream).await;
            });
        }
    })
}

async fn connection(mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut mode = [0u8; 1];
    stream.read_exact(&mut mode).await?;
    match mode[0] {
        MODE_SINK => sink(stream).await,
        MODE_FETCH => fetch(stream).await,
        MODE_ECHO => echo(stream).await,
        _ => Ok(()),
    }
}

/// An append-only log of pooled segments, wrapping to its oldest segment at the cap.
struct Log {
    segments: Vec<Vec<u8>>,
    current: usize,
    segment_size: usize,
    max_segments: usize,
}

impl Log {
    fn new(segment_size: usize, max_segments: usize) -> Self {
        Self {
            segments: Vec::new(),
            current: 0,
            segment_size,
            max_segments,
        }
    }

    fn append(&mut self, bytes: &[u8]) {
        // Measured against the segment size, not the capacity: a pooled segment may be larger.
        let limit = self.segment_size.max(bytes.len());
        let fits = |s: &Vec<u8>| s.len() + bytes.len() <= limit && s.capacity() >= limit;
        if self.segments.get(self.current).is_none_or(|s| !fits(s)) {
            self.current = if self.segments.is_empty() {
                0
            } else {
                self.current + 1
            };
            if self.current == self.max_segments {
                self.current = 0;
            }
            if self.current == self.segments.len() {
                let size = self.segment_size.max(bytes.len());
                let pooled = POOL
                    .lock()
                    .ok()
                    .and_then(|mut p| p.pop())
                    .filter(|s| s.capacity() >= size);
                self.segments
                    .push(pooled.unwrap_or_else(|| Vec::with_capacity(size)));
            }
            self.segments[self.current].clear();
        }
        self.segments[self.current].extend_from_slice(bytes);
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        if let Ok(mut pool) = POOL.lock() {
            pool.extend(self.segments.drain(..).map(|mut s| {
                s.clear();
                s
            }));
        }
    }
}

async fn sink(mut stream: TcpStream) -> std::io::Result<()> {
    let mut log = Log::new(SEGMENT, MAX_SEGMENTS);
    let mut buf = Vec::new();
    let mut total: u64 = 0;
    loop {
        let size = match read_size(&mut stream).await? {
            Some(size) => size,
            None => return Ok(()),
        };
        // Read, then one copy into the log: the shape of a broker that reads a request and
        // stores its batch.
        buf.resize(size, 0);
        stream.read_exact(&mut buf).await?;
        log.append(&buf);
        total += size as u64;
        stream.write_all(&total.to_be_bytes()).await?;
    }
}

async fn fetch(mut stream: TcpStream) -> std::io::Result<()> {
    let log = FETCH.get_or_init(|| vec![0x11u8; FETCH_LOG]);
    let mut at = 0usize;
    loop {
        let size = match read_size(&mut stream).await? {
            Some(size) => size,
            None => return Ok(()),
        };
        if at + size > log.len() {
            at = 0;
        }
        let prefix = (size as u32).to_be_bytes();
        write_two(&mut stream, &prefix, &log[at..at + size]).await?;
        at += size;
    }
}

/// Writes `head` then `body` without copying them together: one `writev` while the head is
/// still unsent, plain writes for the rest (B.5's fetch shape, and what a broker serving stored
/// batches can do).
pub async fn write_two(stream: &mut TcpStream, head: &[u8], body: &[u8]) -> std::io::Result<()> {
    let total = head.len() + body.len();
    let mut done = 0;
    while done < total {
        let n = if done < head.len() {
            let parts = [IoSlice::new(&head[done..]), IoSlice::new(body)];
            stream.write_vectored(&parts).await?
        } else {
            stream.write(&body[done - head.len()..]).await?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        done += n;
    }
    Ok(())
}

async fn echo(mut stream: TcpStream) -> std::io::Result<()> {
    let mut buf = [0u8; ECHO];
    loop {
        match stream.read_exact(&mut buf).await {
            Ok(_) => stream.write_all(&buf).await?,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// The next frame size; `None` at a clean end of stream. A size above the cap is an error that
/// closes the connection.
async fn read_size(stream: &mut TcpStream) -> std::io::Result<Option<usize>> {
    let mut size = [0u8; 4];
    match stream.read_exact(&mut size).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let size = u32::from_be_bytes(size) as usize;
    if size > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {size} bytes is above the {MAX_FRAME}-byte cap"),
        ));
    }
    Ok(Some(size))
}

/// Serves one connection on an in-process listener: lets tests run the probes without
/// spawning a process.
#[cfg(test)]
pub async fn serve_in_process() -> std::net::SocketAddr {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = connection(stream).await;
            });
        }
    });
    addr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_wraps_at_its_cap_and_reuses_segments() {
        let mut log = Log::new(64, 4);
        let frame = [7u8; 48];
        for _ in 0..7 {
            log.append(&frame);
        }
        assert_eq!(log.segments.len(), 4);
        assert_eq!(log.current, 2);
        assert!(log.segments.iter().all(|s| s.len() == 48));
    }

    #[tokio::test]
    async fn oversized_frames_and_unknown_modes_close_the_connection() {
        let addr = serve_in_process().await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&[MODE_SINK]).await.unwrap();
        s.write_all(&(u32::MAX).to_be_bytes()).await.unwrap();
        let mut ack = [0u8; 8];
        assert!(s.read_exact(&mut ack).await.is_err());

        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"Xjunk").await.unwrap();
        let mut byte = [0u8; 1];
        // Closed with unread bytes: a reset or an end of stream, never an answer.
        assert!(!matches!(s.read(&mut byte).await, Ok(n) if n > 0));
    }
}
