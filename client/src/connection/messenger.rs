//! One connection to one broker, shared by many concurrent requests (rskafka's `Messenger`).
//!
//! Requests are pipelined: each gets a fresh correlation id and a slot in a map, and a single
//! reader task hands every answer to the slot with the matching id, whatever the order. When the
//! stream breaks, the messenger is *poisoned*: every waiting request and every later one gets the
//! same error, and the owner (`ConnectionSlot`) replaces it on next use. A request that times out
//! or whose caller gives up removes its own slot, so the map never leaks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use parking_lot::Mutex;
use protocol::frame::{read_frame, start_frame, FrameReadError};
use protocol::pieces::OutFrame;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::{Error, ProtocolError, Result, TransportError};

type Waiter = oneshot::Sender<Result<Bytes, TransportError>>;

enum State {
    Alive(HashMap<i32, Waiter>),
    Poisoned(TransportError),
}

struct Shared {
    addr: String,
    state: Mutex<State>,
}

impl Shared {
    /// Fails every waiter with `err` and every later request too. The first poison wins: later
    /// errors are consequences of it.
    fn poison(&self, err: TransportError) {
        let waiters = {
            let mut state = self.state.lock();
            match std::mem::replace(&mut *state, State::Poisoned(err.clone())) {
                State::Alive(waiters) => waiters,
                State::Poisoned(first) => {
                    *state = State::Poisoned(first);
                    return;
                }
            }
        };
        tracing::debug!(addr = %self.addr, %err, failed = waiters.len(), "connection poisoned");
        for (_, waiter) in waiters {
            let _ = waiter.send(Err(err.clone()));
        }
    }

    fn poison_error(&self) -> Option<TransportError> {
        match &*self.state.lock() {
            State::Alive(_) => None,
            State::Poisoned(e) => Some(e.clone()),
        }
    }

    fn closed_error(&self) -> TransportError {
        self.poison_error()
            .unwrap_or_else(|| TransportError::Closed {
                addr: self.addr.clone(),
            })
    }
}

/// The answer to a request already written: [`Messenger::send`] returns it, [`wait`](Self::wait)
/// reads it. Dropped before the answer arrives (a timeout, a cancelled caller), it removes its
/// own slot, so the map never leaks and a late answer is ignored.
pub struct PendingAnswer {
    shared: Arc<Shared>,
    correlation_id: i32,
    api: &'static str,
    answer: oneshot::Receiver<Result<Bytes, TransportError>>,
}

impl PendingAnswer {
    /// The answer's frame (response header included), or the error that broke the connection.
    pub async fn wait(mut self, timeout: Duration) -> Result<Bytes> {
        match tokio::time::timeout(timeout, &mut self.answer).await {
            Ok(Ok(answer)) => Ok(answer?),
            // The reader dropped our slot: the connection was poisoned in between.
            Ok(Err(_)) => Err(self.shared.closed_error().into()),
            Err(_) => Err(TransportError::Timeout {
                addr: self.shared.addr.clone(),
                api: self.api,
                after: timeout,
            }
            .into()),
        }
    }
}

impl Drop for PendingAnswer {
    fn drop(&mut self) {
        if let State::Alive(waiters) = &mut *self.shared.state.lock() {
            waiters.remove(&self.correlation_id);
        }
    }
}

/// Poisons the connection if dropped while armed: a frame cut off half-way would desynchronise
/// the stream for every later request.
struct HalfWrittenGuard<'a> {
    shared: &'a Shared,
    armed: bool,
}

impl Drop for HalfWrittenGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.poison(TransportError::Abandoned {
                addr: self.shared.addr.clone(),
            });
        }
    }
}

pub struct Messenger<RW> {
    shared: Arc<Shared>,
    writer: tokio::sync::Mutex<WriteHalf<RW>>,
    next_correlation_id: AtomicI32,
    client_id: StrBytes,
    reader: JoinHandle<()>,
}

impl<RW> Drop for Messenger<RW> {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl<RW> Messenger<RW>
where
    RW: AsyncRead + AsyncWrite + Send + 'static,
{
    /// Takes over `stream`; `addr` names the peer in errors, `max_frame` caps answer sizes.
    pub fn new(stream: RW, addr: String, client_id: &str, max_frame: usize) -> Self {
        let (read, write) = tokio::io::split(stream);
        let shared = Arc::new(Shared {
            addr,
            state: Mutex::new(State::Alive(HashMap::new())),
        });
        let reader = tokio::spawn(read_loop(read, Arc::clone(&shared), max_frame));
        Self {
            shared,
            writer: tokio::sync::Mutex::new(write),
            next_correlation_id: AtomicI32::new(0),
            client_id: StrBytes::from_string(client_id.to_string()),
            reader,
        }
    }

    pub fn addr(&self) -> &str {
        &self.shared.addr
    }

    /// The error that broke this connection, if any.
    pub fn poisoned(&self) -> Option<TransportError> {
        self.shared.poison_error()
    }

    /// Sends `req` at `version` and decodes the answer.
    pub async fn request<R: Request>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let frame = self.request_raw(req, version, timeout).await?;
        decode_response::<R>(frame, version)
    }

    /// Sends `req` and returns the answer's frame, response header included (the caller decodes:
    /// ApiVersions must peek at the error code before choosing a version to decode with).
    pub async fn request_raw<R: Request>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<Bytes> {
        self.send(req, version).await?.wait(timeout).await
    }

    /// Writes `req` and returns once it is written, with its answer still to come. Requests sent
    /// one after another (each `send` awaited before the next) reach the broker in that order,
    /// and a broker answers one connection's requests in order: the idempotent producer keeps
    /// several batches of a partition in flight this way without their sequences crossing.
    pub async fn send<O: Outgoing>(&self, req: &O, version: i16) -> Result<PendingAnswer> {
        let (correlation_id, frame) = self.encode(req, version)?;
        let (tx, answer) = oneshot::channel();
        match &mut *self.shared.state.lock() {
            State::Alive(waiters) => {
                waiters.insert(correlation_id, tx);
            }
            State::Poisoned(e) => return Err(e.clone().into()),
        }
        // Made before writing, so a failed or cancelled write also frees the slot.
        let pending = PendingAnswer {
            shared: Arc::clone(&self.shared),
            correlation_id,
            api: api_name(O::Request::KEY),
            answer,
        };
        self.write(&frame).await?;
        Ok(pending)
    }

    /// Sends `req` and expects no answer (Produce with acks=0: the broker sends none, so waiting
    /// for one would hang and matching would misfire).
    pub async fn send_only<O: Outgoing>(&self, req: &O, version: i16) -> Result<()> {
        if let Some(e) = self.shared.poison_error() {
            return Err(e.into());
        }
        let (_, frame) = self.encode(req, version)?;
        self.write(&frame).await
    }

    fn encode<O: Outgoing>(&self, req: &O, version: i16) -> Result<(i32, OutFrame)> {
        let key = O::Request::KEY;
        let correlation_id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let header = RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut head = BytesMut::new();
        let at = start_frame(&mut head);
        let encoded = header
            .encode(&mut head, O::Request::header_version(version))
            .map_err(|e| e.to_string())
            .and_then(|()| req.encode(&mut head, version));
        let failed = |reason: String| ProtocolError::Encode {
            api: api_name(key),
            version,
            reason,
        };
        let pieces = encoded.map_err(failed)?;
        let frame = OutFrame::seal(head, at, pieces).map_err(|e| failed(e.to_string()))?;
        Ok((correlation_id, frame))
    }

    async fn write(&self, frame: &OutFrame) -> Result<()> {
        let mut writer = self.writer.lock().await;
        // Checked under the writer lock: a poisoned stream may be mid-frame.
        if let Some(e) = self.shared.poison_error() {
            return Err(e.into());
        }
        let mut guard = HalfWrittenGuard {
            shared: &self.shared,
            armed: true,
        };
        let written = async {
            frame.write_to(&mut *writer).await?;
            writer.flush().await
        }
        .await;
        guard.armed = false;
        if let Err(source) = written {
            let err = TransportError::Io {
                addr: self.shared.addr.clone(),
                source: Arc::new(source),
            };
            self.shared.poison(err.clone());
            return Err(err.into());
        }
        Ok(())
    }
}

/// A request the messenger can write. Every Kafka request of the crate is one, encoded whole
/// into the frame buffer; a Produce body may leave its record batches out as pieces.
pub trait Outgoing {
    /// The request whose key, header version and answer this is.
    type Request: Request;

    /// Encodes into `head` and returns what follows it on the wire, written as is.
    fn encode(&self, head: &mut BytesMut, version: i16) -> std::result::Result<Vec<Bytes>, String>;
}

impl<R: Request> Outgoing for R {
    type Request = R;

    fn encode(&self, head: &mut BytesMut, version: i16) -> std::result::Result<Vec<Bytes>, String> {
        Encodable::encode(self, head, version).map_err(|e| e.to_string())?;
        Ok(Vec::new())
    }
}

/// Decodes an answer frame (response header, then body) for a request sent at `version`.
pub fn decode_response<R: Request>(mut frame: Bytes, version: i16) -> Result<R::Response> {
    let api = api_name(R::KEY);
    let decode_err = |reason: String| -> Error {
        ProtocolError::Decode {
            api,
            version,
            reason,
        }
        .into()
    };
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    kafka_protocol::messages::ResponseHeader::decode(&mut frame, header_version)
        .map_err(|e| decode_err(e.to_string()))?;
    R::Response::decode(&mut frame, version).map_err(|e| decode_err(e.to_string()))
}

/// The API's name for errors and logs.
pub fn api_name(key: i16) -> &'static str {
    match ApiKey::try_from(key) {
        Ok(ApiKey::Produce) => "Produce",
        Ok(ApiKey::Fetch) => "Fetch",
        Ok(ApiKey::ListOffsets) => "ListOffsets",
        Ok(ApiKey::Metadata) => "Metadata",
        Ok(ApiKey::ApiVersions) => "ApiVersions",
        Ok(ApiKey::CreateTopics) => "CreateTopics",
        Ok(ApiKey::DeleteTopics) => "DeleteTopics",
        Ok(ApiKey::CreatePartitions) => "CreatePartitions",
        Ok(ApiKey::DescribeConfigs) => "DescribeConfigs",
        Ok(ApiKey::AlterConfigs) => "AlterConfigs",
        Ok(ApiKey::IncrementalAlterConfigs) => "IncrementalAlterConfigs",
        Ok(ApiKey::InitProducerId) => "InitProducerId",
        Ok(ApiKey::FindCoordinator) => "FindCoordinator",
        Ok(ApiKey::JoinGroup) => "JoinGroup",
        Ok(ApiKey::SyncGroup) => "SyncGroup",
        Ok(ApiKey::Heartbeat) => "Heartbeat",
        Ok(ApiKey::LeaveGroup) => "LeaveGroup",
        Ok(ApiKey::OffsetCommit) => "OffsetCommit",
        Ok(ApiKey::OffsetFetch) => "OffsetFetch",
        Ok(ApiKey::DescribeGroups) => "DescribeGroups",
        Ok(ApiKey::ListGroups) => "ListGroups",
        Ok(ApiKey::DeleteGroups) => "DeleteGroups",
        Ok(ApiKey::AlterPartitionReassignments) => "AlterPartitionReassignments",
        Ok(ApiKey::ListPartitionReassignments) => "ListPartitionReassignments",
        _ => "request",
    }
}

async fn read_loop<RW: AsyncRead>(mut reader: ReadHalf<RW>, shared: Arc<Shared>, max_frame: usize) {
    let mut buf = BytesMut::new();
    let addr = shared.addr.clone();
    let err = loop {
        let frame = match read_frame(&mut reader, &mut buf, max_frame).await {
            Ok(Some(frame)) => frame.freeze(),
            Ok(None) => break TransportError::Closed { addr },
            Err(FrameReadError::Io(source)) => {
                break TransportError::Io {
                    addr,
                    source: Arc::new(source),
                }
            }
            Err(FrameReadError::Frame(e)) => match not_kafka(&buf) {
                Some(answer) => break TransportError::NotKafka { addr, answer },
                None => {
                    break TransportError::Frame {
                        addr,
                        reason: e.to_string(),
                    }
                }
            },
        };
        let Some(id) = frame.get(..4) else {
            break TransportError::Frame {
                addr,
                reason: format!("a {}-byte answer has no correlation id", frame.len()),
            };
        };
        let correlation_id = i32::from_be_bytes(id.try_into().expect("4 bytes"));
        let waiter = match &mut *shared.state.lock() {
            State::Alive(waiters) => waiters.remove(&correlation_id),
            State::Poisoned(_) => return,
        };
        match waiter {
            Some(waiter) => {
                let _ = waiter.send(Ok(frame));
            }
            // Normal after a timeout or a cancelled request: the answer came too late.
            None => tracing::debug!(%addr, correlation_id, "answer nobody waits for, dropped"),
        }
    };
    shared.poison(err);
}

/// What a peer that broke framing said instead, when it is recognisably another protocol: a
/// size prefix of "HTTP" (1213486160) is a web server's status line, 0x15 0x03 a TLS alert.
fn not_kafka(start: &[u8]) -> Option<String> {
    if start.starts_with(&[0x15, 0x03]) || start.starts_with(&[0x16, 0x03]) {
        return Some("in TLS (a listener that wants SSL; this client speaks plaintext)".into());
    }
    let text = start.get(..4)?;
    if !text.iter().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    // Only what the frame reader had buffered, often just the first few bytes.
    let line: String = start
        .iter()
        .take_while(|b| b.is_ascii_graphic() || **b == b' ')
        .take(60)
        .map(|&b| char::from(b))
        .collect();
    let cut = if line.len() == start.len() { "..." } else { "" };
    Some(format!(
        "\"{line}{cut}\" (a web server or another text protocol?)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, ResponseHeader};
    use protocol::frame::{finish_frame, DEFAULT_MAX_FRAME_BYTES};
    use protocol::versions::HeaderPrefix;
    use tokio::io::{duplex, DuplexStream};

    /// The broker end of a duplex stream: reads request frames, returns their header prefixes.
    struct FakeBroker {
        stream: DuplexStream,
        buf: BytesMut,
    }

    impl FakeBroker {
        async fn next_request(&mut self) -> Option<HeaderPrefix> {
            let frame = read_frame(&mut self.stream, &mut self.buf, 1 << 20)
                .await
                .unwrap()?;
            HeaderPrefix::peek(&frame)
        }

        /// Answers with a Metadata v1 whose controller id tags the answer.
        async fn answer_metadata(&mut self, correlation_id: i32, tag: i32) {
            let resp = MetadataResponse::default().with_controller_id(BrokerId(tag));
            let mut out = BytesMut::new();
            let at = start_frame(&mut out);
            ResponseHeader::default()
                .with_correlation_id(correlation_id)
                .encode(&mut out, 0)
                .unwrap();
            resp.encode(&mut out, 1).unwrap();
            finish_frame(&mut out, at, 0).unwrap();
            self.stream.write_all(&out).await.unwrap();
        }
    }

    fn pair() -> (Arc<Messenger<DuplexStream>>, FakeBroker) {
        let (ours, theirs) = duplex(1 << 16);
        let messenger = Messenger::new(ours, "fake:9092".into(), "test", DEFAULT_MAX_FRAME_BYTES);
        (
            Arc::new(messenger),
            FakeBroker {
                stream: theirs,
                buf: BytesMut::new(),
            },
        )
    }

    fn tag_of(resp: &MetadataResponse) -> i32 {
        resp.controller_id.0
    }

    #[tokio::test]
    async fn answers_out_of_order_reach_the_right_request() {
        let (m, mut broker) = pair();
        let req = MetadataRequest::default();
        let t = Duration::from_secs(5);
        let (m1, m2, r1, r2) = (m.clone(), m.clone(), req.clone(), req.clone());
        let first = tokio::spawn(async move { m1.request(&r1, 1, t).await });
        let a = broker.next_request().await.unwrap();
        let second = tokio::spawn(async move { m2.request(&r2, 1, t).await });
        let b = broker.next_request().await.unwrap();
        assert_ne!(a.correlation_id, b.correlation_id);
        assert_eq!((a.api_key, a.api_version), (3, 1));
        // Answer the second request first.
        broker.answer_metadata(b.correlation_id, 2).await;
        broker.answer_metadata(a.correlation_id, 1).await;
        assert_eq!(tag_of(&first.await.unwrap().unwrap()), 1);
        assert_eq!(tag_of(&second.await.unwrap().unwrap()), 2);
    }

    #[tokio::test]
    async fn a_web_server_or_a_tls_listener_is_named_for_what_it_is() {
        for (answer, said) in [
            (
                &b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"[..],
                "\"HTTP/1.1",
            ),
            (&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32][..], "in TLS"),
        ] {
            let (m, mut broker) = pair();
            let req = MetadataRequest::default();
            let asked =
                tokio::spawn(async move { m.request(&req, 1, Duration::from_secs(5)).await });
            broker.next_request().await.unwrap();
            broker.stream.write_all(answer).await.unwrap();
            let err = asked.await.unwrap().unwrap_err();
            assert!(
                matches!(&err, Error::Transport(TransportError::NotKafka { answer, .. }) if answer.contains(said)),
                "{err}"
            );
            assert!(
                err.to_string()
                    .starts_with("fake:9092 is not a Kafka broker: it answered"),
                "{err}"
            );
            assert!(!err.is_retriable());
        }
        // Binary garbage stays a framing error.
        assert_eq!(not_kafka(&[0x7f, 0, 0, 1]), None);
    }

    #[tokio::test]
    async fn sends_are_written_in_order_and_answered_when_asked() {
        let (m, mut broker) = pair();
        let mut pending = Vec::new();
        for _ in 0..5 {
            pending.push(m.send(&MetadataRequest::default(), 1).await.unwrap());
        }
        let mut ids = Vec::new();
        for _ in 0..5 {
            ids.push(broker.next_request().await.unwrap().correlation_id);
        }
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        for (tag, id) in ids.iter().enumerate().rev() {
            broker.answer_metadata(*id, tag as i32).await;
        }
        for (tag, answer) in pending.into_iter().enumerate() {
            let frame = answer.wait(Duration::from_secs(5)).await.unwrap();
            let resp = decode_response::<MetadataRequest>(frame, 1).unwrap();
            assert_eq!(tag_of(&resp), tag as i32);
        }
        // A dropped answer frees its slot; its late arrival is ignored.
        drop(m.send(&MetadataRequest::default(), 1).await.unwrap());
        let late = broker.next_request().await.unwrap().correlation_id;
        broker.answer_metadata(late, 9).await;
        let m2 = m.clone();
        let next = tokio::spawn(async move {
            m2.request(&MetadataRequest::default(), 1, Duration::from_secs(5))
                .await
        });
        let id = broker.next_request().await.unwrap().correlation_id;
        broker.answer_metadata(id, 10).await;
        assert_eq!(tag_of(&next.await.unwrap().unwrap()), 10);
    }

    #[tokio::test]
    async fn a_closed_stream_fails_every_waiter_and_later_requests() {
        let (m, mut broker) = pair();
        let t = Duration::from_secs(5);
        let mut waiting = Vec::new();
        for _ in 0..3 {
            let m = m.clone();
            waiting.push(tokio::spawn(async move {
                m.request(&MetadataRequest::default(), 1, t).await
            }));
            broker.next_request().await.unwrap();
        }
        drop(broker);
        for w in waiting {
            let err = w.await.unwrap().unwrap_err();
            assert!(
                matches!(err, Error::Transport(TransportError::Closed { .. })),
                "{err}"
            );
        }
        assert!(m.poisoned().is_some());
        let later = m.request(&MetadataRequest::default(), 1, t).await;
        assert!(matches!(later, Err(Error::Transport(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_frees_the_slot_and_a_late_answer_is_ignored() {
        let (m, mut broker) = pair();
        let err = {
            let req = MetadataRequest::default();
            let fut = m.request(&req, 1, Duration::from_millis(50));
            let (res, req) = tokio::join!(fut, broker.next_request());
            let late = req.unwrap().correlation_id;
            broker.answer_metadata(late, 99).await;
            res.unwrap_err()
        };
        assert!(matches!(
            err,
            Error::Transport(TransportError::Timeout { .. })
        ));
        // The connection still works for the next request.
        let m2 = m.clone();
        let next = tokio::spawn(async move {
            m2.request(&MetadataRequest::default(), 1, Duration::from_secs(5))
                .await
        });
        let id = broker.next_request().await.unwrap().correlation_id;
        broker.answer_metadata(id, 3).await;
        assert_eq!(tag_of(&next.await.unwrap().unwrap()), 3);
        assert!(m.poisoned().is_none());
    }

    #[tokio::test]
    async fn an_oversized_answer_poisons_instead_of_allocating() {
        let (ours, mut theirs) = duplex(1024);
        let m = Messenger::new(ours, "fake:9092".into(), "test", 1000);
        let m = Arc::new(m);
        let m2 = m.clone();
        let waiting = tokio::spawn(async move {
            m2.request(&MetadataRequest::default(), 1, Duration::from_secs(5))
                .await
        });
        let mut buf = BytesMut::new();
        read_frame(&mut theirs, &mut buf, 1 << 20).await.unwrap();
        theirs.write_all(&5000i32.to_be_bytes()).await.unwrap();
        let err = waiting.await.unwrap().unwrap_err();
        assert!(
            matches!(err, Error::Transport(TransportError::Frame { .. })),
            "{err}"
        );
    }

    #[tokio::test]
    async fn garbage_bodies_are_decode_errors_not_panics() {
        let (m, mut broker) = pair();
        let m2 = m.clone();
        let waiting = tokio::spawn(async move {
            m2.request(&MetadataRequest::default(), 1, Duration::from_secs(5))
                .await
        });
        let id = broker.next_request().await.unwrap().correlation_id;
        let mut out = BytesMut::new();
        let at = start_frame(&mut out);
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&[0xff, 0xff, 0xff, 0x7f, 1, 2]);
        finish_frame(&mut out, at, 0).unwrap();
        broker.stream.write_all(&out).await.unwrap();
        let err = waiting.await.unwrap().unwrap_err();
        assert!(matches!(err, Error::Protocol(ProtocolError::Decode { .. })));
    }

    #[tokio::test]
    async fn send_only_writes_a_frame_and_waits_for_nothing() {
        let (m, mut broker) = pair();
        m.send_only(&MetadataRequest::default(), 1).await.unwrap();
        let req = broker.next_request().await.unwrap();
        assert_eq!(req.api_key, 3);
    }
}
