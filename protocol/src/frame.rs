//! Length-prefixed frames: a big-endian i32 size, then that many bytes.
//!
//! A size prefix is untrusted input. It is checked against a cap before anything is reserved, and
//! even a valid size only grows the buffer as bytes actually arrive, so a peer that announces
//! 100 MiB and sends nothing costs us nothing.

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Kafka's `socket.request.max.bytes` default.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 100 * 1024 * 1024;

/// Largest read-ahead reservation, so a large frame is read in a few big reads but a claimed size
/// never becomes one big allocation up front.
const READ_CHUNK: usize = 1024 * 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame size {0} is negative")]
    Negative(i32),
    #[error("frame size {size} exceeds the limit of {cap} bytes")]
    TooLarge { size: usize, cap: usize },
    #[error("connection closed inside a frame ({0} bytes buffered)")]
    Truncated(usize),
}

/// Splits one complete frame (without its size prefix) off the front of `buf`, if there is one.
pub fn split_frame(buf: &mut BytesMut, cap: usize) -> Result<Option<BytesMut>, FrameError> {
    let Some(size) = frame_size(buf, cap)? else {
        return Ok(None);
    };
    if buf.len() < 4 + size {
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(size)))
}

/// The size the next frame announces, checked against `cap`; `None` until 4 bytes are buffered.
fn frame_size(buf: &[u8], cap: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let size = i32::from_be_bytes(prefix.try_into().expect("4 bytes"));
    if size < 0 {
        return Err(FrameError::Negative(size));
    }
    let size = size as usize;
    if size > cap {
        return Err(FrameError::TooLarge { size, cap });
    }
    Ok(Some(size))
}

/// Reads the next frame from `reader`, buffering in `buf` (which keeps any bytes of later frames).
/// `Ok(None)` is a clean end of stream between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut BytesMut,
    cap: usize,
) -> Result<Option<BytesMut>, FrameReadError> {
    loop {
        if let Some(frame) = split_frame(buf, cap)? {
            return Ok(Some(frame));
        }
        let missing = match frame_size(buf, cap)? {
            Some(size) => 4 + size - buf.len(),
            None => 4 - buf.len(),
        };
        buf.reserve(missing.min(READ_CHUNK));
        if reader.read_buf(buf).await? == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(FrameError::Truncated(buf.len()).into())
            };
        }
    }
}

/// Why reading a frame failed: the peer broke framing, or the transport failed.
#[derive(Debug, thiserror::Error)]
pub enum FrameReadError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Appends a frame's size prefix placeholder; [`finish_frame`] fills it once the body is written.
pub fn start_frame(out: &mut BytesMut) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    at
}

/// Writes the size of everything after the prefix at `at`, plus `following` bytes that will be
/// written after `out` without being copied into it (0 when the frame is all in `out`). Fails
/// if the frame would pass 2 GiB.
pub fn finish_frame(out: &mut BytesMut, at: usize, following: usize) -> Result<(), FrameError> {
    let size = (out.len() - at - 4).saturating_add(following);
    let prefix = i32::try_from(size).map_err(|_| FrameError::TooLarge {
        size,
        cap: i32::MAX as usize,
    })?;
    out[at..at + 4].copy_from_slice(&prefix.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn splits_complete_frames_and_waits_for_partial_ones() {
        let mut buf = BytesMut::from(&framed(b"hello")[..]);
        buf.extend_from_slice(&framed(b"world")[..6]);
        assert_eq!(&split_frame(&mut buf, 100).unwrap().unwrap()[..], b"hello");
        assert_eq!(split_frame(&mut buf, 100).unwrap(), None);
        buf.extend_from_slice(b"rl");
        assert_eq!(split_frame(&mut buf, 100).unwrap(), None);
    }

    #[test]
    fn rejects_negative_and_oversized_sizes_before_the_body_arrives() {
        let mut buf = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert_eq!(split_frame(&mut buf, 100), Err(FrameError::Negative(-1)));
        let mut buf = BytesMut::from(&101i32.to_be_bytes()[..]);
        assert_eq!(
            split_frame(&mut buf, 100),
            Err(FrameError::TooLarge {
                size: 101,
                cap: 100
            })
        );
    }

    #[tokio::test]
    async fn a_claimed_size_does_not_reserve_its_bytes() {
        // The peer announces 90 MiB and sends 3 bytes, then closes.
        let mut wire = (90 * 1024 * 1024i32).to_be_bytes().to_vec();
        wire.extend_from_slice(b"abc");
        let mut reader = &wire[..];
        let mut buf = BytesMut::new();
        let err = read_frame(&mut reader, &mut buf, DEFAULT_MAX_FRAME_BYTES)
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            FrameReadError::Frame(FrameError::Truncated(7))
        ));
        assert!(
            buf.capacity() <= 2 * READ_CHUNK,
            "reserved {}",
            buf.capacity()
        );
    }

    #[tokio::test]
    async fn clean_end_of_stream_between_frames() {
        let wire = framed(b"x");
        let mut reader = &wire[..];
        let mut buf = BytesMut::new();
        let first = read_frame(&mut reader, &mut buf, 10).await.unwrap();
        assert_eq!(&first.unwrap()[..], b"x");
        assert!(read_frame(&mut reader, &mut buf, 10)
            .await
            .unwrap()
            .is_none());
    }

    #[test]
    fn start_and_finish_write_the_size_prefix() {
        let mut out = BytesMut::new();
        let at = start_frame(&mut out);
        out.extend_from_slice(b"body");
        finish_frame(&mut out, at, 0).unwrap();
        assert_eq!(&out[..], &framed(b"body")[..]);
    }
}
