//! Frames written around bytes already held, instead of copied with them.
//!
//! The crate's encoders copy every record batch into the frame buffer. For megabyte batches that
//! copy, and the cache misses of reading each batch twice, cost more than the socket write
//! itself. Here the fields are encoded into the frame buffer and each batch of [`SPLICE_FROM`]
//! bytes or more follows as a piece of its own; [`OutFrame::write_to`] hands the buffer and the
//! pieces to one `writev`. The client writes Produce requests this way, the broker Fetch answers.
//!
//! Writing fields by hand outside the crate needs Kafka's length fields, so they are here too.

use std::io::IoSlice;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::frame::{finish_frame, FrameError};

/// Smaller batches are copied into the frame: one contiguous write beats a vector of small
/// pieces, and copying a few kilobytes costs next to nothing.
pub const SPLICE_FROM: usize = 4096;

/// Slices handed to one `writev` at the most: Linux's `IOV_MAX`, where the standard library caps
/// a call anyway. The rest goes in the next call.
const MAX_SLICES: usize = 1024;

/// Where encoding stands: fields go into the frame buffer until the first spliced batch, then
/// into a buffer of their own after it, and so on.
pub struct Pieces<'a> {
    head: &'a mut BytesMut,
    /// Fields after the last spliced batch; `None` while still writing into `head`.
    tail: Option<BytesMut>,
    pieces: Vec<Bytes>,
}

impl<'a> Pieces<'a> {
    pub fn new(head: &'a mut BytesMut) -> Self {
        Self {
            head,
            tail: None,
            pieces: Vec::new(),
        }
    }

    /// Where the next fields go.
    pub fn buf(&mut self) -> &mut BytesMut {
        match &mut self.tail {
            Some(tail) => tail,
            None => self.head,
        }
    }

    /// Appends `bytes`: copied when smaller than [`SPLICE_FROM`], else as a piece of its own
    /// (a reference count, not a copy).
    pub fn bytes(&mut self, bytes: &Bytes) {
        if bytes.len() < SPLICE_FROM {
            self.buf().put_slice(bytes);
            return;
        }
        // Batches spliced one after another have no fields between them: no empty piece.
        if let Some(tail) = self.tail.take().filter(|t| !t.is_empty()) {
            self.pieces.push(tail.freeze());
        }
        self.pieces.push(bytes.clone());
        self.tail = Some(BytesMut::new());
    }

    /// What follows the frame buffer on the wire, in order.
    pub fn finish(mut self) -> Vec<Bytes> {
        self.pieces.extend(
            self.tail
                .take()
                .filter(|t| !t.is_empty())
                .map(BytesMut::freeze),
        );
        self.pieces
    }
}

/// A length that does not fit its field (or a frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what} of {len} does not fit its length field")]
pub struct TooLong {
    pub what: &'static str,
    pub len: usize,
}

/// An array's element count or a byte string's length, never null: INT32 in the classic
/// versions, UNSIGNED_VARINT of the count plus one (0 meaning null) in the flexible ones.
pub fn put_len(
    buf: &mut BytesMut,
    flexible: bool,
    what: &'static str,
    len: usize,
) -> Result<(), TooLong> {
    let n = i32::try_from(len).map_err(|_| TooLong { what, len })?;
    if flexible {
        // At most i32::MAX + 1: fits.
        put_uvarint(buf, n as u32 + 1);
    } else {
        buf.put_i32(n);
    }
    Ok(())
}

/// A non-null string: INT16 length in the classic versions, compact in the flexible ones.
pub fn put_string(buf: &mut BytesMut, flexible: bool, s: &str) -> Result<(), TooLong> {
    if flexible {
        put_len(buf, true, "string", s.len())?;
    } else {
        let len = i16::try_from(s.len()).map_err(|_| TooLong {
            what: "string",
            len: s.len(),
        })?;
        buf.put_i16(len);
    }
    buf.put_slice(s.as_bytes());
    Ok(())
}

/// The end of a struct's fields: in the flexible versions its tagged fields, here none.
pub fn put_no_tagged_fields(buf: &mut BytesMut, flexible: bool) {
    if flexible {
        put_uvarint(buf, 0);
    }
}

/// Kafka's UNSIGNED_VARINT: seven bits a byte, least significant first.
pub fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8(v as u8 | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// A frame on its way out: size prefix, header and encoded fields in `head`, then `pieces`,
/// written as they are.
#[derive(Debug, Default)]
pub struct OutFrame {
    head: BytesMut,
    pieces: Vec<Bytes>,
}

impl OutFrame {
    /// The frame whose size prefix [`start_frame`](crate::frame::start_frame) put at `at` in
    /// `head`, followed by `pieces`: writes the size of both into the prefix. Fails if the frame
    /// would pass 2 GiB.
    pub fn seal(mut head: BytesMut, at: usize, pieces: Vec<Bytes>) -> Result<Self, FrameError> {
        let following = pieces
            .iter()
            .fold(0usize, |sum, piece| sum.saturating_add(piece.len()));
        finish_frame(&mut head, at, following)?;
        Ok(Self { head, pieces })
    }

    /// Writes the whole frame, in as few system calls as the stream allows (one `writev` on a
    /// TCP socket with room in its buffer).
    pub async fn write_to<W: AsyncWrite + Unpin + ?Sized>(
        &self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        let mut parts = Vec::with_capacity(1 + self.pieces.len());
        parts.push(&self.head[..]);
        parts.extend(self.pieces.iter().map(|piece| &piece[..]));
        write_all_vectored(writer, &parts).await
    }
}

/// Writes every part in order, looping over short writes.
pub async fn write_all_vectored<W: AsyncWrite + Unpin + ?Sized>(
    writer: &mut W,
    parts: &[&[u8]],
) -> std::io::Result<()> {
    // How far the write has come: parts before `at` are out, and `into` bytes of `parts[at]`.
    let (mut at, mut into) = (0, 0);
    while at < parts.len() {
        let slices: Vec<IoSlice<'_>> = std::iter::once(&parts[at][into..])
            .chain(parts[at + 1..].iter().copied())
            .take(MAX_SLICES)
            .map(IoSlice::new)
            .collect();
        let mut written = writer.write_vectored(&slices).await?;
        if written == 0 && slices.iter().any(|s| !s.is_empty()) {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while at < parts.len() && written >= parts[at].len() - into {
            written -= parts[at].len() - into;
            (at, into) = (at + 1, 0);
        }
        into += written;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::start_frame;

    /// Takes at most three bytes per call, across slices, as a full socket buffer would.
    struct Trickle(Vec<u8>);

    impl AsyncWrite for Trickle {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(3);
            self.get_mut().0.extend_from_slice(&buf[..n]);
            std::task::Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let this = self.get_mut();
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(3 - n);
                this.0.extend_from_slice(&b[..take]);
                n += take;
            }
            std::task::Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn pieces_are_written_whole_and_in_order_through_short_writes() {
        let parts: [&[u8]; 5] = [b"head", b"", b"a", b"0123456789", b"tail"];
        let mut out = Trickle(Vec::new());
        write_all_vectored(&mut out, &parts).await.unwrap();
        assert_eq!(out.0, b"heada0123456789tail");
    }

    #[tokio::test]
    async fn more_parts_than_one_writev_takes_are_all_written() {
        let parts: Vec<Vec<u8>> = (0..3 * MAX_SLICES).map(|i| vec![i as u8; 2]).collect();
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let mut out = Vec::new();
        write_all_vectored(&mut out, &refs).await.unwrap();
        assert_eq!(out, parts.concat());
    }

    #[test]
    fn small_bytes_are_copied_and_big_ones_spliced_without_empty_pieces() {
        let big = Bytes::from(vec![7u8; SPLICE_FROM]);
        let small = Bytes::from_static(b"small");
        let mut head = BytesMut::from(&b"head"[..]);
        let mut out = Pieces::new(&mut head);
        out.bytes(&small);
        out.bytes(&big);
        out.bytes(&big);
        out.buf().put_u8(1);
        out.bytes(&small);
        let pieces = out.finish();
        assert_eq!(&head[..], b"headsmall");
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces[0].as_ptr(), big.as_ptr());
        assert_eq!(pieces[1].as_ptr(), big.as_ptr());
        assert_eq!(&pieces[2][..], b"\x01small");
    }

    #[test]
    fn lengths_are_int32_or_compact_and_refused_past_i32() {
        let mut buf = BytesMut::new();
        put_len(&mut buf, false, "array", 3).unwrap();
        put_len(&mut buf, true, "array", 200).unwrap();
        put_string(&mut buf, false, "ab").unwrap();
        put_string(&mut buf, true, "ab").unwrap();
        assert_eq!(
            &buf[..],
            &[0, 0, 0, 3, 0xc9, 0x01, 0, 2, b'a', b'b', 3, b'a', b'b']
        );
        let too_long = i32::MAX as usize + 1;
        assert!(put_len(&mut buf, true, "array", too_long).is_err());
        assert!(put_string(&mut buf, false, &"x".repeat(1 << 15)).is_err());
    }

    #[test]
    fn a_frame_past_two_gib_is_refused_not_wrapped() {
        let mut head = BytesMut::new();
        let at = start_frame(&mut head);
        head.put_slice(b"body");
        // 64 MiB shared 32 times: 2 GiB of pieces, one allocation.
        let chunk = Bytes::from(vec![0u8; 64 << 20]);
        let pieces = vec![chunk; 32];
        assert!(matches!(
            OutFrame::seal(head.clone(), at, pieces),
            Err(FrameError::TooLarge { .. })
        ));
        let frame = OutFrame::seal(head, at, vec![Bytes::from_static(b"!")]).unwrap();
        assert_eq!(&frame.head[..4], &5i32.to_be_bytes());
        assert_eq!(frame.head.len() + frame.pieces[0].len(), 9);
    }
}
