//! A Kafka-protocol broker that lacks an API, as other brokers do (tansu offers no
//! CreatePartitions): a proxy in front of one of ours that leaves the API out of every
//! ApiVersions answer and, like Kafka with an API key it does not know, closes the connection
//! of a client that sends it anyway. The broker behind it must advertise the proxy's address
//! (`advertised_listener`), so that clients never reach the broker directly.
//!
//! Or a broker that knows an API only up to an older version ([`WithoutApi::older`]), as
//! brokers before a KIP do: its ApiVersions answer caps the API's max version.
//!
//! Or a broker without transactional ids ([`WithoutApi::without_transactional_ids`]): it
//! offers InitProducerId, for idempotent producers, but refuses one that names a
//! transactional id, as a broker refuses what it does not implement (UNSUPPORTED_VERSION).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsResponse, InitProducerIdRequest, InitProducerIdResponse, RequestHeader,
    ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use kafka_protocol::ResponseError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{start_broker, Broker, BrokerConfig};

const API_VERSIONS: i16 = 18;
const INIT_PRODUCER_ID: i16 = 22;

/// What the proxy takes away from the broker behind it.
#[derive(Debug, Clone, Copy)]
enum Missing {
    /// An API key, left out of ApiVersions.
    Api(i16),
    /// An API key offered only up to this version.
    Newer { key: i16, max: i16 },
    /// InitProducerId with a transactional id.
    TransactionalIds,
}

/// Our broker behind a proxy without API `hidden`; both stop when this is dropped.
pub struct WithoutApi {
    pub addr: SocketAddr,
    pub broker: Broker,
    proxy: tokio::task::JoinHandle<()>,
}

impl WithoutApi {
    /// Starts a broker with `config` (its listener on 127.0.0.1:0) behind a proxy that hides API
    /// key `hidden`.
    pub async fn start(config: BrokerConfig, hidden: i16) -> Self {
        Self::missing(config, Missing::Api(hidden)).await
    }

    /// Starts a broker with `config` behind a proxy that offers API key `key` only up to
    /// version `max`.
    pub async fn older(config: BrokerConfig, key: i16, max: i16) -> Self {
        Self::missing(config, Missing::Newer { key, max }).await
    }

    /// Starts a broker with `config` behind a proxy that answers every InitProducerId naming a
    /// transactional id with UNSUPPORTED_VERSION, and passes everything else.
    pub async fn without_transactional_ids(config: BrokerConfig) -> Self {
        Self::missing(config, Missing::TransactionalIds).await
    }

    async fn missing(config: BrokerConfig, missing: Missing) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let broker = start_broker(BrokerConfig {
            advertised_listener: Some(("127.0.0.1".to_string(), addr.port())),
            ..config
        })
        .await;
        let upstream = broker.addr();
        let proxy = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, upstream, missing));
            }
        });
        WithoutApi {
            addr,
            broker,
            proxy,
        }
    }
}

impl Drop for WithoutApi {
    fn drop(&mut self) {
        self.proxy.abort();
    }
}

/// One client connection: requests go up unchanged (until one uses a hidden API), answers come
/// back unchanged but those to ApiVersions, which lose it; without transactional ids, an
/// InitProducerId naming one is answered here.
async fn relay(client: TcpStream, upstream: SocketAddr, missing: Missing) {
    let hidden = match missing {
        Missing::Api(key) => key,
        Missing::Newer { .. } | Missing::TransactionalIds => -1,
    };
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut client_rx, client_tx) = client.into_split();
    // Both directions answer the client: the broker's answers, and the proxy's refusals.
    let client_tx = Arc::new(tokio::sync::Mutex::new(client_tx));
    let (mut server_rx, mut server_tx) = server.into_split();
    // Correlation ids of the ApiVersions requests in flight, with their versions.
    let asked: Arc<Mutex<Vec<(i32, i16)>>> = Arc::default();
    let requests = {
        let asked = asked.clone();
        let refusals = client_tx.clone();
        async move {
            while let Some(frame) = read(&mut client_rx).await {
                let mut header = frame.clone();
                if header.remaining() < 8 {
                    return;
                }
                let (key, version, correlation) =
                    (header.get_i16(), header.get_i16(), header.get_i32());
                if key == hidden {
                    return;
                }
                if key == API_VERSIONS {
                    asked.lock().unwrap().push((correlation, version));
                }
                if matches!(missing, Missing::TransactionalIds) && key == INIT_PRODUCER_ID {
                    if let Some(refusal) = refuse_transactional(&frame, version) {
                        if write(&mut *refusals.lock().await, &refusal).await.is_err() {
                            return;
                        }
                        continue;
                    }
                }
                if write(&mut server_tx, &frame).await.is_err() {
                    return;
                }
            }
        }
    };
    let answers = async move {
        while let Some(frame) = read(&mut server_rx).await {
            let correlation = frame.clone().get_i32();
            let version = {
                let mut asked = asked.lock().unwrap();
                let at = asked.iter().position(|(c, _)| *c == correlation);
                at.map(|i| asked.remove(i).1)
            };
            let frame = match version {
                Some(version) => without(frame, version, missing),
                None => frame,
            };
            if write(&mut *client_tx.lock().await, &frame).await.is_err() {
                return;
            }
        }
    };
    // Either side closing ends both: the client sees its connection closed.
    tokio::select! {
        () = requests => {}
        () = answers => {}
    }
}

/// The answer to an InitProducerId request that names a transactional id: UNSUPPORTED_VERSION,
/// with the request's correlation id. `None` for one without (an idempotent producer), which
/// goes on to the broker.
fn refuse_transactional(frame: &Bytes, version: i16) -> Option<Bytes> {
    let mut body = frame.clone();
    let header =
        RequestHeader::decode(&mut body, InitProducerIdRequest::header_version(version)).ok()?;
    let request = InitProducerIdRequest::decode(&mut body, version).ok()?;
    request.transactional_id.as_ref()?;
    let mut out = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(header.correlation_id)
        .encode(&mut out, InitProducerIdResponse::header_version(version))
        .ok()?;
    InitProducerIdResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_producer_id((-1).into())
        .with_producer_epoch(-1)
        .encode(&mut out, version)
        .ok()?;
    Some(out.freeze())
}

/// An ApiVersions answer (header v0: the correlation id) without what is `missing`. An error
/// answer (UNSUPPORTED_VERSION comes encoded at v0 whatever was asked) passes unchanged.
fn without(frame: Bytes, version: i16, missing: Missing) -> Bytes {
    let mut body = frame.slice(4..);
    if body.clone().get_i16() != 0 {
        return frame;
    }
    let mut answer = ApiVersionsResponse::decode(&mut body, version).unwrap();
    match missing {
        Missing::Api(hidden) => answer.api_keys.retain(|api| api.api_key != hidden),
        Missing::Newer { key, max } => {
            for api in answer.api_keys.iter_mut().filter(|api| api.api_key == key) {
                api.max_version = api.max_version.min(max);
            }
        }
        Missing::TransactionalIds => {}
    }
    let mut out = BytesMut::new();
    out.put_slice(&frame[..4]);
    answer.encode(&mut out, version).unwrap();
    out.freeze()
}

async fn read(from: &mut (impl AsyncReadExt + Unpin)) -> Option<Bytes> {
    let size = from.read_i32().await.ok()?;
    let mut frame = vec![0; usize::try_from(size).ok()?];
    from.read_exact(&mut frame).await.ok()?;
    Some(frame.into())
}

async fn write(to: &mut (impl AsyncWriteExt + Unpin), frame: &[u8]) -> std::io::Result<()> {
    let size = i32::try_from(frame.len()).unwrap_or(i32::MAX);
    to.write_all(&size.to_be_bytes()).await?;
    to.write_all(frame).await
}
