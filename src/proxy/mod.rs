//! `tabletop proxy`: a transparent HTTP proxy in front of a Table endpoint. Applications point
//! their table endpoint at it; Shared Key signatures stay valid because the Host is not signed
//! and the path is forwarded byte for byte. Every request it passes becomes an `AttemptRecord`
//! (one per operation of a `$batch`), and with a throttle it answers 503 ServerBusy beyond a
//! per-partition rate, as the service does.
//!
//! The client side is served by hyper (HTTP/1.1, keep-alive, chunked bodies); the upstream side
//! is reqwest, so an https upstream works. Records always carry `attempt: 1`: a proxy cannot
//! tell a retry from a new request.

pub mod attribution;
pub mod summary;
pub mod throttle;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::azure::telemetry::{AttemptRecord, Operation, PartitionRef, Telemetry};
use attribution::{Attributed, Classified, RequestView};
pub use summary::{summary_line, Interval, Summary};
pub use throttle::Throttle;

/// The default listen address of `tabletop proxy`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:10102";
/// The default upstream: the local emulator's table endpoint.
pub const DEFAULT_UPSTREAM: &str = "http://127.0.0.1:10002";

/// Request bodies above this are refused (the service's own limit is 4 MiB).
const MAX_REQUEST_BODY: usize = 8 << 20;
/// Responses are buffered to count entities; larger ones are answered 502.
const MAX_RESPONSE_BODY: usize = 64 << 20;
/// The service gives up on a request after 30 s; leave room beyond that.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(120);
/// A client that opens a connection and says nothing is dropped after this.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `stop` waits for requests in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Connection-scoped headers that are not forwarded (RFC 9110 §7.6.1), plus those the
/// forwarding client sets itself.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "expect",
];

#[derive(Clone, Debug)]
pub struct ProxyConfig {
    pub listen: SocketAddr,
    /// The service origin, e.g. `http://127.0.0.1:10002` or `https://acct.table.core.windows.net`.
    /// A path (such as `/devstoreaccount1`) is allowed and only used for the endpoint hint: the
    /// client's path is forwarded unchanged.
    pub upstream: String,
    /// Entities per second per partition; beyond it the proxy answers 503 ServerBusy.
    pub throttle: Option<f64>,
    /// The account name for records; derived per request when None (first path segment for an
    /// IP/localhost upstream, else the upstream host's first label).
    pub account: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("--upstream {0}")]
    Upstream(String),
    #[error("--throttle must be a positive number of entities per second, not {0}")]
    Throttle(f64),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot build the upstream HTTP client: {0}")]
    Client(String),
}

/// A running proxy. Dropping it stops accepting and aborts connections; `stop` drains first.
pub struct Proxy {
    addr: SocketAddr,
    upstream: reqwest::Url,
    path_style: bool,
    account_hint: Option<String>,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Binds `config.listen` and serves on the current tokio runtime.
    pub async fn start(config: ProxyConfig, telemetry: Telemetry) -> Result<Proxy, ProxyError> {
        let upstream = reqwest::Url::parse(&config.upstream)
            .map_err(|e| ProxyError::Upstream(format!("'{}': {e}", config.upstream)))?;
        if !matches!(upstream.scheme(), "http" | "https") || upstream.host_str().is_none() {
            return Err(ProxyError::Upstream(format!(
                "'{}' is not an http(s) URL",
                config.upstream
            )));
        }
        if upstream.query().is_some() {
            return Err(ProxyError::Upstream(
                "must not carry a query (a SAS stays with the application)".into(),
            ));
        }
        let throttle = match config.throttle {
            None => None,
            Some(r) if r.is_finite() && r > 0.0 => Some(Throttle::new(r)),
            Some(r) => return Err(ProxyError::Throttle(r)),
        };
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // HTTP(S)_PROXY must not silently reroute the application's traffic.
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .timeout(UPSTREAM_TIMEOUT)
            .build()
            .map_err(|e| ProxyError::Client(e.to_string()))?;
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| ProxyError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| ProxyError::Bind {
            addr: config.listen,
            source,
        })?;
        let path_style = is_local_host(upstream.host_str().unwrap_or(""));
        let account_hint = config.account.clone().or_else(|| {
            if path_style {
                upstream
                    .path_segments()
                    .and_then(|mut s| s.next())
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .or_else(|| Some(crate::azure::connection::DEV_ACCOUNT.to_string()))
            } else {
                upstream
                    .host_str()
                    .and_then(|h| h.split('.').next())
                    .map(str::to_string)
            }
        });
        let shutdown = CancellationToken::new();
        let mut origin = upstream.clone();
        origin.set_path("");
        let shared = Arc::new(Shared {
            origin: origin.as_str().trim_end_matches('/').to_string(),
            host_account: (!path_style)
                .then(|| account_hint.clone())
                .flatten()
                .unwrap_or_default(),
            path_style,
            account: config.account.map(Arc::from),
            throttle,
            telemetry,
            http,
        });
        let task = tokio::spawn(accept_loop(listener, shared, shutdown.clone()));
        Ok(Proxy {
            addr,
            upstream,
            path_style,
            account_hint,
            shutdown,
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The table endpoint an application uses to go through the proxy, e.g.
    /// `http://127.0.0.1:10102/devstoreaccount1`.
    pub fn table_endpoint(&self) -> String {
        match (&self.account_hint, self.path_style) {
            (Some(account), true) => format!("http://{}/{account}", self.addr),
            _ => format!("http://{}", self.addr),
        }
    }

    /// A connection string for the application, with the key left for the user to fill in.
    pub fn connection_string_hint(&self) -> String {
        let account = self.account_hint.as_deref().unwrap_or("ACCOUNT");
        format!(
            "DefaultEndpointsProtocol=http;AccountName={account};AccountKey=<your key>;TableEndpoint={}",
            self.table_endpoint()
        )
    }

    pub fn upstream(&self) -> &reqwest::Url {
        &self.upstream
    }

    /// Cancelled when the proxy stops (for tasks tied to its lifetime).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops accepting, lets requests in flight finish (up to a few seconds), then returns.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(DRAIN_TIMEOUT + Duration::from_secs(1), task).await;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn is_local_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host == "host.docker.internal"
        || host.parse::<std::net::IpAddr>().is_ok()
}

struct Shared {
    /// `scheme://host[:port]` of the upstream, no trailing slash.
    origin: String,
    /// The account of a host-style upstream (its host's first label).
    host_account: String,
    path_style: bool,
    account: Option<Arc<str>>,
    throttle: Option<Throttle>,
    telemetry: Telemetry,
    http: reqwest::Client,
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, shutdown: CancellationToken) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    conns.spawn(serve_connection(stream, shared.clone(), shutdown.clone()));
                }
                // Transient (e.g. EMFILE): back off rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        conns.shutdown().await;
    }
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(shared.handle(req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN_TIMEOUT, conn).await;
        }
    }
}

/// The upstream's answer, buffered.
struct Upstream {
    status: u16,
    headers: HeaderMap,
    body: Bytes,
}

impl Shared {
    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let started = Instant::now();
        let time = SystemTime::now();
        let (parts, body) = req.into_parts();
        let path = parts.uri.path().to_string();
        let query = parts.uri.query().map(str::to_string);
        let (account, prefix, resource) = self.locate(&path);
        let body = match Limited::new(body, MAX_REQUEST_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                let too_large = e
                    .downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some();
                return if too_large {
                    service_error(
                        &parts.headers,
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "RequestBodyTooLarge",
                        "The request body is too large and exceeds the maximum permissible limit.",
                    )
                } else {
                    plain(StatusCode::BAD_REQUEST, "cannot read the request body")
                };
            }
        };
        let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        let view = RequestView {
            method: parts.method.as_str(),
            resource: &resource,
            query: query.as_deref(),
            if_match: parts.headers.contains_key("if-match"),
            x_http_method: header("x-http-method"),
            body: &body,
        };
        let classified = attribution::classify(&view, &prefix);
        let ops: &[Attributed] = match &classified {
            Classified::Single(a) => std::slice::from_ref(a),
            Classified::Batch(ops) => ops,
            Classified::Unknown => &[],
        };
        let outcome = Outcome {
            time,
            started,
            account: &account,
            ops,
            batch: matches!(classified, Classified::Batch(_)),
            bytes_sent: body.len() as u64,
        };

        if !self.admit(ops) {
            let resp = service_error(
                &parts.headers,
                StatusCode::SERVICE_UNAVAILABLE,
                "ServerBusy",
                "Operations per second is over the account limit.",
            );
            let received = hyper::body::Body::size_hint(resp.body())
                .exact()
                .unwrap_or(0);
            self.emit(
                &outcome,
                Some(503),
                Some("ServerBusy"),
                received,
                &[],
                false,
            );
            return resp;
        }

        let url = match query.as_deref() {
            Some(q) => format!("{}{path}?{q}", self.origin),
            None => format!("{}{path}", self.origin),
        };
        match self.forward(&parts, &url, body).await {
            Ok(up) => {
                let code = up
                    .headers
                    .get("x-ms-error-code")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                self.emit(
                    &outcome,
                    Some(up.status),
                    code.as_deref(),
                    up.body.len() as u64,
                    &up.body,
                    false,
                );
                relay(up)
            }
            Err(e) => {
                self.emit(&outcome, None, None, 0, &[], e.is_timeout());
                plain(
                    StatusCode::BAD_GATEWAY,
                    &format!("tabletop proxy: no answer from the upstream: {e}"),
                )
            }
        }
    }

    /// (account, account path prefix, resource path) for a request path.
    fn locate(&self, path: &str) -> (Arc<str>, String, String) {
        if self.path_style {
            let rest = path.trim_start_matches('/');
            let (segment, resource) = match rest.split_once('/') {
                Some((s, r)) => (s, format!("/{r}")),
                None => (rest, "/".to_string()),
            };
            let account = self.account.clone().unwrap_or_else(|| {
                Arc::from(
                    percent_encoding::percent_decode_str(segment)
                        .decode_utf8_lossy()
                        .as_ref(),
                )
            });
            (account, format!("/{segment}"), resource)
        } else {
            let account = self
                .account
                .clone()
                .unwrap_or_else(|| Arc::from(self.host_account.as_str()));
            (account, String::new(), path.to_string())
        }
    }

    /// Takes the throttle's tokens for the request; false when it must be refused.
    fn admit(&self, ops: &[Attributed]) -> bool {
        let Some(throttle) = &self.throttle else {
            return true;
        };
        let Some(table) = ops.first().and_then(|o| o.table.as_deref()) else {
            return true;
        };
        let mut charges: Vec<(&str, u32)> = Vec::new();
        for op in ops {
            let PartitionRef::Key(pk) = &op.partition else {
                continue;
            };
            let cost = op.entity_count.max(1);
            match charges.iter_mut().find(|(p, _)| *p == pk.as_str()) {
                Some(c) => c.1 += cost,
                None => charges.push((pk, cost)),
            }
        }
        charges.is_empty() || throttle.try_acquire(table, &charges, Instant::now())
    }

    async fn forward(
        &self,
        parts: &hyper::http::request::Parts,
        url: &str,
        body: Bytes,
    ) -> Result<Upstream, reqwest::Error> {
        let mut headers = HeaderMap::with_capacity(parts.headers.len());
        for (name, value) in &parts.headers {
            if !is_hop_by_hop(name, &parts.headers) {
                headers.append(name.clone(), value.clone());
            }
        }
        let mut builder = self
            .http
            .request(parts.method.clone(), url)
            .headers(headers);
        if !body.is_empty() {
            builder = builder.body(body);
        }
        let mut resp = builder.send().await?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let mut buf = Vec::new();
        while let Some(chunk) = resp.chunk().await? {
            buf.extend_from_slice(&chunk);
            if buf.len() > MAX_RESPONSE_BODY {
                // Report as a gateway failure rather than buffer without bound.
                return Ok(Upstream {
                    status: 502,
                    headers: HeaderMap::new(),
                    body: Bytes::from_static(b"tabletop proxy: response too large to relay"),
                });
            }
        }
        Ok(Upstream {
            status,
            headers,
            body: Bytes::from(buf),
        })
    }

    /// One record per operation (none for requests it does not understand). Queries get the
    /// entity count of the response and are charged to the throttle after the fact.
    fn emit(
        &self,
        o: &Outcome<'_>,
        status: Option<u16>,
        code: Option<&str>,
        bytes_received: u64,
        response: &[u8],
        timed_out: bool,
    ) {
        if o.ops.is_empty() {
            return;
        }
        let ok = status.is_some_and(|s| (200..300).contains(&s));
        let outcomes = match (o.batch, status) {
            (true, Some(s)) => attribution::batch_outcomes(o.ops.len(), s, code, response),
            _ => vec![(status.unwrap_or(0), code.map(str::to_string)); o.ops.len()],
        };
        let latency = o.started.elapsed();
        for (i, (op, (op_status, op_code))) in o.ops.iter().zip(outcomes).enumerate() {
            let mut entity_count = op.entity_count;
            if op.operation == Operation::QueryEntities {
                entity_count = if ok {
                    attribution::count_entities(response).unwrap_or(0)
                } else {
                    0
                };
                if let (Some(t), Some(table), PartitionRef::Key(pk)) =
                    (&self.throttle, op.table.as_deref(), &op.partition)
                {
                    // One token was taken at admission.
                    t.charge(table, pk, entity_count.saturating_sub(1), Instant::now());
                }
            }
            if !self.telemetry.is_active() {
                continue;
            }
            // The request's bytes are carried by the first record so sums stay right.
            let first = i == 0;
            self.telemetry.emit(&AttemptRecord {
                time: o.time,
                account: o.account.clone(),
                table: op.table.as_deref().map(Arc::from),
                operation: op.operation,
                partition: op.partition.clone(),
                entity_count,
                status: status.map(|_| op_status),
                error_code: op_code,
                attempt: 1,
                latency,
                bytes_sent: if first { o.bytes_sent } else { 0 },
                bytes_received: if first { bytes_received } else { 0 },
                timed_out,
            });
        }
    }
}

/// What the records of one request share.
struct Outcome<'a> {
    time: SystemTime,
    started: Instant,
    account: &'a Arc<str>,
    ops: &'a [Attributed],
    batch: bool,
    bytes_sent: u64,
}

fn is_hop_by_hop(name: &HeaderName, headers: &HeaderMap) -> bool {
    let n = name.as_str();
    HOP_BY_HOP.contains(&n)
        || headers
            .get_all("connection")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(n))
}

fn relay(up: Upstream) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(up.body));
    *resp.status_mut() = StatusCode::from_u16(up.status).unwrap_or(StatusCode::BAD_GATEWAY);
    for (name, value) in &up.headers {
        if !is_hop_by_hop(name, &up.headers) {
            resp.headers_mut().append(name.clone(), value.clone());
        }
    }
    resp
}

/// An error as the Table service sends it: `x-ms-error-code` and the JSON `odata.error` body.
fn service_error(
    request: &HeaderMap,
    status: StatusCode,
    code: &str,
    message: &str,
) -> Response<Full<Bytes>> {
    let now = time::OffsetDateTime::now_utc();
    let request_id = uuid::Uuid::from_u128(fastrand::u128(..)).to_string();
    let stamp = now
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let body = serde_json::json!({
        "odata.error": {
            "code": code,
            "message": {
                "lang": "en-US",
                "value": format!("{message}\nRequestId:{request_id}\nTime:{stamp}"),
            }
        }
    })
    .to_string();
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    let mut put = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(name, v);
        }
    };
    put(
        "content-type",
        "application/json;odata=minimalmetadata;streaming=true;charset=utf-8",
    );
    put("x-ms-error-code", code);
    put("x-ms-request-id", &request_id);
    let version = request
        .get("x-ms-version")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("2019-02-02");
    put("x-ms-version", version);
    if let Some(id) = request
        .get("x-ms-client-request-id")
        .and_then(|v| v.to_str().ok())
    {
        put("x-ms-client-request-id", id);
    }
    resp
}

/// A failure of the proxy itself (not a service error).
fn plain(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(message.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_paths_survive_the_upstream_url_unchanged() {
        // The client's encoded path is what Shared Key signs; reqwest must not re-encode it.
        for path in [
            "/devstoreaccount1/t1(PartitionKey='p%27%271%20x',RowKey='r1%20%C3%A9')",
            "/devstoreaccount1/$batch",
            "/devstoreaccount1/Tables('t1')",
            "/t1()",
        ] {
            let url = reqwest::Url::parse(&format!("http://127.0.0.1:10002{path}")).unwrap();
            assert_eq!(url.path(), path);
        }
    }

    #[test]
    fn hop_by_hop_headers_are_dropped_including_those_named_by_connection() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("close, x-private"));
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("authorization", HeaderValue::from_static("SharedKey a:b"));
        let kept: Vec<_> = h
            .keys()
            .filter(|n| !is_hop_by_hop(n, &h))
            .map(|n| n.as_str().to_string())
            .collect();
        assert_eq!(kept, ["authorization"]);
    }
}
