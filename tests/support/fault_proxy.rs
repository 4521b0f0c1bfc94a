//! Fault-injecting HTTP/1.1 proxy for tests: sits on a loopback port in front of Azurite and,
//! on a seeded deterministic schedule, answers 503 ServerBusy / 500 OperationTimedOut, resets
//! connections before or after forwarding, or stalls; otherwise it relays faithfully.
//!
//! The n-th request the proxy parses gets the n-th draw of `fastrand::Rng::with_seed(seed)`,
//! so a sequential client sees the same faults on every run. Client connections are kept alive
//! (as real clients expect); each request gets a fresh upstream connection with
//! `Connection: close`. Request bodies must be framed by Content-Length: chunked request bodies
//! are answered with 400 (the tabletop client always sends Content-Length).

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// Largest request/response head accepted (Azurite itself rejects long URLs with 431).
const MAX_HEAD: usize = 1 << 20;
/// Largest body buffered in either direction (Table requests are at most 4 MiB).
const MAX_BODY: usize = 64 << 20;
/// Bound on one upstream exchange so a wedged upstream cannot hold a task forever.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);

/// What to inject, with per-request probabilities (their sum should be ≤ 1).
#[derive(Clone, Debug)]
pub struct FaultPlan {
    pub seed: u64,
    /// Reply 503 `ServerBusy` without forwarding.
    pub server_busy: f64,
    /// Forward (the write may commit), then reply 500 `OperationTimedOut` instead.
    pub operation_timed_out: f64,
    /// Reset the client connection without forwarding.
    pub reset_before: f64,
    /// Forward and read the response, then reset the client connection without replying.
    pub reset_after: f64,
    /// Hold the connection silent for `stall_for`, then close it.
    pub stall: f64,
    pub stall_for: Duration,
    /// Stop injecting after this many faults (the schedule's draws continue regardless).
    pub max_faults: Option<usize>,
}

impl FaultPlan {
    /// A transparent proxy.
    pub fn none() -> Self {
        FaultPlan {
            seed: 0,
            server_busy: 0.0,
            operation_timed_out: 0.0,
            reset_before: 0.0,
            reset_after: 0.0,
            stall: 0.0,
            stall_for: Duration::from_secs(10),
            max_faults: None,
        }
    }

    fn pick(&self, draw: f64) -> Fault {
        let table = [
            (self.server_busy, Fault::ServerBusy),
            (self.operation_timed_out, Fault::OperationTimedOut),
            (self.reset_before, Fault::ResetBefore),
            (self.reset_after, Fault::ResetAfter),
            (self.stall, Fault::Stall),
        ];
        let mut upper = 0.0;
        for (p, fault) in table {
            upper += p;
            if draw < upper {
                return fault;
            }
        }
        Fault::None
    }
}

impl Default for FaultPlan {
    fn default() -> Self {
        FaultPlan::none()
    }
}

/// The decision taken for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    ServerBusy,
    OperationTimedOut,
    ResetBefore,
    ResetAfter,
    Stall,
}

/// Counters since the proxy started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Client connections accepted (1 for a keep-alive client that saw no resets).
    pub connections: usize,
    /// Requests parsed (each consumed one draw).
    pub requests: usize,
    /// Requests sent upstream, including those whose response was then replaced or dropped.
    pub forwarded: usize,
    pub server_busy: usize,
    pub timed_out: usize,
    pub resets_before: usize,
    pub resets_after: usize,
    pub stalls: usize,
}

impl FaultStats {
    pub fn faults(&self) -> usize {
        self.server_busy + self.timed_out + self.resets_before + self.resets_after + self.stalls
    }
}

struct State {
    rng: fastrand::Rng,
    stats: FaultStats,
    schedule: Vec<Fault>,
}

struct Shared {
    plan: FaultPlan,
    upstream: SocketAddr,
    state: Mutex<State>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the counters from the others.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn decide(&self) -> Fault {
        let mut st = self.state();
        st.stats.requests += 1;
        let draw = st.rng.f64();
        let exhausted = self
            .plan
            .max_faults
            .is_some_and(|max| st.stats.faults() >= max);
        let fault = if exhausted {
            Fault::None
        } else {
            self.plan.pick(draw)
        };
        match fault {
            Fault::None => {}
            Fault::ServerBusy => st.stats.server_busy += 1,
            Fault::OperationTimedOut => st.stats.timed_out += 1,
            Fault::ResetBefore => st.stats.resets_before += 1,
            Fault::ResetAfter => st.stats.resets_after += 1,
            Fault::Stall => st.stats.stalls += 1,
        }
        st.schedule.push(fault);
        fault
    }
}

/// A running proxy; stops accepting and drops all its connections when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// Binds 127.0.0.1:0 and serves on the current tokio runtime.
    pub async fn start(upstream: SocketAddr, plan: FaultPlan) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                rng: fastrand::Rng::with_seed(plan.seed),
                stats: FaultStats::default(),
                schedule: Vec::new(),
            }),
            plan,
            upstream,
        });
        let task = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(FaultProxy { addr, shared, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/devstoreaccount1`: the table endpoint as seen through the proxy.
    pub fn endpoint(&self) -> String {
        format!("http://{}/devstoreaccount1", self.addr)
    }

    pub fn stats(&self) -> FaultStats {
        self.shared.state().stats.clone()
    }

    /// The decision taken for each request so far, in arrival order.
    pub fn schedule(&self) -> Vec<Fault> {
        self.shared.state().schedule.clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // Dropping the accept loop drops its JoinSet, which aborts every connection task.
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    shared.state().stats.connections += 1;
                    conns.spawn(serve_client(stream, shared.clone()));
                }
                // Transient (e.g. EMFILE): back off rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// A stream plus the bytes read from it but not yet consumed.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn new(stream: TcpStream) -> Self {
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    async fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Reads through the next `delim`; `None` on a clean EOF before any byte.
    async fn read_through(&mut self, delim: &[u8], max: usize) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(pos) = find(&self.buf, delim) {
                return Ok(Some(self.buf.drain(..pos + delim.len()).collect()));
            }
            if self.buf.len() > max {
                return Err(invalid("header section too large"));
            }
            if self.fill().await? == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
        }
    }

    async fn read_line(&mut self) -> io::Result<Vec<u8>> {
        self.read_through(b"\r\n", MAX_HEAD)
            .await?
            .ok_or_else(|| io::ErrorKind::UnexpectedEof.into())
    }

    async fn read_exact(&mut self, n: usize) -> io::Result<Vec<u8>> {
        if n > MAX_BODY {
            return Err(invalid("body too large"));
        }
        while self.buf.len() < n {
            if self.fill().await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    async fn read_to_end(&mut self) -> io::Result<Vec<u8>> {
        while self.fill().await? > 0 {
            if self.buf.len() > MAX_BODY {
                return Err(invalid("body too large"));
            }
        }
        Ok(std::mem::take(&mut self.buf))
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_owned())
}

/// A parsed head: the start line and headers in order, names as sent.
struct Head {
    start: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn parse(raw: &[u8]) -> io::Result<Head> {
        let text = std::str::from_utf8(raw).map_err(|_| invalid("head is not UTF-8"))?;
        let mut lines = text.split("\r\n").filter(|l| !l.is_empty());
        let start = lines
            .next()
            .ok_or_else(|| invalid("empty head"))?
            .to_owned();
        let headers = lines
            .map(|line| {
                let (name, value) = line
                    .split_once(':')
                    .ok_or_else(|| invalid("malformed header line"))?;
                Ok((name.trim().to_owned(), value.trim().to_owned()))
            })
            .collect::<io::Result<_>>()?;
        Ok(Head { start, headers })
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    fn content_length(&self) -> io::Result<Option<usize>> {
        self.get("content-length")
            .map(|v| v.parse().map_err(|_| invalid("bad Content-Length")))
            .transpose()
    }

    /// Serializes with hop-by-hop headers replaced by `connection` (and `extra` appended).
    fn to_bytes(&self, connection: &str, extra: &[(&str, String)]) -> Vec<u8> {
        let mut out = format!("{}\r\n", self.start);
        for (name, value) in &self.headers {
            let hop = ["connection", "keep-alive", "proxy-connection"]
                .iter()
                .any(|h| name.eq_ignore_ascii_case(h));
            if !hop {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        for (name, value) in extra {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str(&format!("Connection: {connection}\r\n\r\n"));
        out.into_bytes()
    }
}

struct Request {
    head: Head,
    body: Vec<u8>,
}

impl Request {
    fn method(&self) -> &str {
        self.head.start.split(' ').next().unwrap_or("")
    }

    fn keep_alive(&self) -> bool {
        if self.head.start.ends_with("HTTP/1.0") {
            self.head.has_token("connection", "keep-alive")
        } else {
            !self.head.has_token("connection", "close")
        }
    }
}

/// `Ok(None)` when the client closed between requests.
async fn read_request(client: &mut Conn) -> io::Result<Option<Request>> {
    let Some(raw) = client.read_through(b"\r\n\r\n", MAX_HEAD).await? else {
        return Ok(None);
    };
    let head = Head::parse(&raw)?;
    if head.get("transfer-encoding").is_some() {
        return Err(invalid(
            "the fault proxy needs Content-Length request bodies (chunked is not supported)",
        ));
    }
    let body = match head.content_length()? {
        Some(n) => client.read_exact(n).await?,
        None => Vec::new(),
    };
    Ok(Some(Request { head, body }))
}

struct Response {
    head: Head,
    /// The body exactly as framed on the wire (chunked framing kept).
    body: Vec<u8>,
    /// The upstream delimited the body by closing; the relay must add a Content-Length.
    eof_framed: bool,
}

impl Response {
    fn to_bytes(&self, keep_alive: bool) -> Vec<u8> {
        let connection = if keep_alive { "keep-alive" } else { "close" };
        let extra = if self.eof_framed {
            vec![("Content-Length", self.body.len().to_string())]
        } else {
            Vec::new()
        };
        let mut out = self.head.to_bytes(connection, &extra);
        out.extend_from_slice(&self.body);
        out
    }
}

async fn forward(shared: &Shared, req: &Request) -> io::Result<Response> {
    tokio::time::timeout(UPSTREAM_TIMEOUT, exchange(shared, req))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "upstream timed out"))?
}

async fn exchange(shared: &Shared, req: &Request) -> io::Result<Response> {
    let mut upstream = Conn::new(TcpStream::connect(shared.upstream).await?);
    let mut out = req.head.to_bytes("close", &[]);
    out.extend_from_slice(&req.body);
    upstream.stream.write_all(&out).await?;
    shared.state().stats.forwarded += 1;
    loop {
        let raw = upstream
            .read_through(b"\r\n\r\n", MAX_HEAD)
            .await?
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        let head = Head::parse(&raw)?;
        let status: u16 = head
            .start
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid("bad status line"))?;
        // Interim responses (100 Continue) are not relayed; the final one follows.
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        let bodiless = req.method() == "HEAD" || status == 204 || status == 304;
        let mut eof_framed = false;
        let body = if bodiless {
            Vec::new()
        } else if head.has_token("transfer-encoding", "chunked") {
            read_chunked_raw(&mut upstream).await?
        } else if let Some(n) = head.content_length()? {
            upstream.read_exact(n).await?
        } else {
            eof_framed = true;
            upstream.read_to_end().await?
        };
        return Ok(Response {
            head,
            body,
            eof_framed,
        });
    }
}

/// Reads a chunked body through its trailer section, returning the bytes as received.
async fn read_chunked_raw(conn: &mut Conn) -> io::Result<Vec<u8>> {
    let mut raw = Vec::new();
    loop {
        let line = conn.read_line().await?;
        let text = std::str::from_utf8(&line).map_err(|_| invalid("bad chunk size"))?;
        let size_hex = text.trim_end().split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| invalid("bad chunk size"))?;
        raw.extend_from_slice(&line);
        if size == 0 {
            loop {
                let trailer = conn.read_line().await?;
                raw.extend_from_slice(&trailer);
                if trailer == b"\r\n" {
                    return Ok(raw);
                }
            }
        }
        if raw.len() + size > MAX_BODY {
            return Err(invalid("body too large"));
        }
        raw.extend_from_slice(&conn.read_exact(size + 2).await?);
    }
}

async fn serve_client(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let mut client = Conn::new(stream);
    loop {
        let req = match read_request(&mut client).await {
            Ok(Some(req)) => req,
            Ok(None) => return,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let reply = plain_response(400, "Bad Request", &e.to_string());
                let _ = client.stream.write_all(&reply).await;
                return;
            }
            Err(_) => return,
        };
        let keep_alive = req.keep_alive();
        let reply = match shared.decide() {
            Fault::None => match forward(&shared, &req).await {
                Ok(resp) => resp.to_bytes(keep_alive),
                Err(e) => {
                    let reply = plain_response(502, "Bad Gateway", &e.to_string());
                    let _ = client.stream.write_all(&reply).await;
                    return;
                }
            },
            Fault::ServerBusy => service_error(
                &req,
                503,
                "Service Unavailable",
                "ServerBusy",
                "Operations per second is over the account limit.",
                keep_alive,
            ),
            Fault::OperationTimedOut => {
                // The upstream outcome is discarded on purpose: a write may have committed.
                let _ = forward(&shared, &req).await;
                service_error(
                    &req,
                    500,
                    "Internal Server Error",
                    "OperationTimedOut",
                    "Operation could not be completed within the specified time.",
                    keep_alive,
                )
            }
            Fault::ResetBefore => return reset(client),
            Fault::ResetAfter => {
                let _ = forward(&shared, &req).await;
                return reset(client);
            }
            Fault::Stall => return stall(client, shared.plan.stall_for).await,
        };
        if client.stream.write_all(&reply).await.is_err() || !keep_alive {
            return;
        }
    }
}

/// Abortive close: SO_LINGER 0 makes the kernel send RST instead of FIN.
fn reset(client: Conn) {
    let _ = client.stream.set_zero_linger();
    drop(client);
}

/// Says nothing for `dur` (or until the client gives up), then closes.
async fn stall(mut client: Conn, dur: Duration) {
    let _ = tokio::time::timeout(dur, async {
        loop {
            client.buf.clear();
            match client.fill().await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
}

/// An error as the Table service sends it: `x-ms-error-code` plus the JSON `odata.error` body.
fn service_error(
    req: &Request,
    status: u16,
    reason: &str,
    code: &str,
    message: &str,
    keep_alive: bool,
) -> Vec<u8> {
    let now = time::OffsetDateTime::now_utc();
    let request_id = request_id();
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
    let date = now
        .format(time::macros::format_description!(
            "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
        ))
        .unwrap_or_default();
    let version = req.head.get("x-ms-version").unwrap_or("2019-02-02");
    let connection = if keep_alive { "keep-alive" } else { "close" };
    format!(
        "HTTP/1.1 {status} {reason}\r\n\
         Content-Type: application/json;odata=minimalmetadata;streaming=true;charset=utf-8\r\n\
         Content-Length: {}\r\n\
         x-ms-error-code: {code}\r\n\
         x-ms-request-id: {request_id}\r\n\
         x-ms-version: {version}\r\n\
         Date: {date}\r\n\
         Connection: {connection}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A proxy-level failure (not a service error); the connection is closed after it.
fn plain_response(status: u16, reason: &str, message: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{message}",
        message.len()
    )
    .into_bytes()
}

/// Request ids only need to look like the service's; they are not part of the schedule.
fn request_id() -> String {
    let h = format!("{:032x}", fastrand::u128(..));
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}
