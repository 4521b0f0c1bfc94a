//! Proves the test support itself: the shared emulator answers, and the fault proxy relays
//! faithfully or injects exactly the planned faults.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::{azurite, unique_table, Fault, FaultPlan, FaultProxy};

fn client() -> reqwest::Client {
    // no_proxy: an HTTP(S)_PROXY in the environment must not capture loopback test traffic.
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn azurite_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], azurite().port()))
}

async fn proxy(plan: FaultPlan) -> FaultProxy {
    FaultProxy::start(azurite_addr(), plan).await.unwrap()
}

fn error_code(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get("x-ms-error-code")
        .map(|v| v.to_str().unwrap().to_owned())
}

/// A stand-in upstream that answers each request with its body, chunk-encoded, and reports the
/// Connection header it received; one request per connection, like Azurite under the proxy.
async fn echo_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let head_end = loop {
                    let n = stream.read(&mut chunk).await.unwrap();
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break p + 4;
                    }
                };
                let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
                let header = |name: &str| {
                    head.lines()
                        .find_map(|l| {
                            let (n, v) = l.split_once(':')?;
                            n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                        })
                        .unwrap_or_default()
                };
                let len: usize = header("content-length").parse().unwrap_or(0);
                while buf.len() < head_end + len {
                    let n = stream.read(&mut chunk).await.unwrap();
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body = &buf[head_end..head_end + len];
                let mut out = format!(
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nx-seen-connection: {}\r\n\r\n",
                    header("connection")
                )
                .into_bytes();
                for part in body.chunks(3) {
                    out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                    out.extend_from_slice(part);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
                stream.write_all(&out).await.unwrap();
            });
        }
    });
    addr
}

#[tokio::test]
async fn emulator_starts_and_answers() {
    let emu = azurite();
    assert!(emu.table_endpoint().starts_with("http://127.0.0.1:"));
    assert!(emu
        .connection_string()
        .ends_with(&format!("TableEndpoint={}", emu.table_endpoint())));
    let resp = client()
        .get(format!("{}/Tables", emu.table_endpoint()))
        .send()
        .await
        .unwrap();
    // Unsigned, so Azurite refuses it; any answer proves it is up.
    assert_eq!(resp.status(), 403);
    let server = resp.headers()["server"].to_str().unwrap();
    assert!(server.starts_with("Azurite-Table/3.37.0"), "{server}");
}

#[test]
fn unique_tables_are_valid_and_distinct() {
    let a = unique_table("harness_smoke");
    let b = unique_table("harness_smoke");
    let c = unique_table("9lives");
    assert_ne!(a, b);
    for name in [&a, &b, &c, &unique_table("")] {
        assert!((3..=63).contains(&name.len()), "{name}");
        assert!(
            name.starts_with(|ch: char| ch.is_ascii_alphabetic()),
            "{name}"
        );
        assert!(name.chars().all(|ch| ch.is_ascii_alphanumeric()), "{name}");
    }
}

#[tokio::test]
async fn transparent_proxy_relays_azurite_over_one_kept_alive_connection() {
    let proxy = proxy(FaultPlan::none()).await;
    let client = client();
    for _ in 0..5 {
        let resp = client
            .get(format!("{}/Tables", proxy.endpoint()))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 403);
        assert_eq!(error_code(&resp).as_deref(), Some("AuthorizationFailure"));
        assert!(resp
            .text()
            .await
            .unwrap()
            .contains("<Code>AuthorizationFailure</Code>"));
    }
    let stats = proxy.stats();
    assert_eq!(
        (
            stats.connections,
            stats.requests,
            stats.forwarded,
            stats.faults()
        ),
        (1, 5, 5, 0)
    );
}

#[tokio::test]
async fn proxy_forwards_bodies_with_connection_close_and_relays_chunked_responses() {
    let proxy = FaultProxy::start(echo_upstream().await, FaultPlan::none())
        .await
        .unwrap();
    let client = client();
    for body in ["hello, table", "", "x"] {
        let resp = client
            .post(format!("http://{}/echo", proxy.addr()))
            .header("Connection", "keep-alive")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["x-seen-connection"], "close");
        assert_eq!(resp.text().await.unwrap(), body);
    }
    assert_eq!(proxy.stats().connections, 1);
}

#[tokio::test]
async fn server_busy_is_answered_by_the_proxy_without_forwarding() {
    let proxy = proxy(FaultPlan {
        server_busy: 1.0,
        ..FaultPlan::none()
    })
    .await;
    let resp = client()
        .get(format!("{}/Tables", proxy.endpoint()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(error_code(&resp).as_deref(), Some("ServerBusy"));
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json;odata=minimalmetadata"));
    let body: serde_json::Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(body["odata.error"]["code"], "ServerBusy");
    let message = body["odata.error"]["message"]["value"].as_str().unwrap();
    assert!(message.starts_with("Operations per second is over the account limit.\nRequestId:"));
    let stats = proxy.stats();
    assert_eq!((stats.server_busy, stats.forwarded), (1, 0));
}

#[tokio::test]
async fn operation_timed_out_forwards_then_replaces_the_response() {
    let proxy = proxy(FaultPlan {
        operation_timed_out: 1.0,
        ..FaultPlan::none()
    })
    .await;
    let resp = client()
        .get(format!("{}/Tables", proxy.endpoint()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 500);
    assert_eq!(error_code(&resp).as_deref(), Some("OperationTimedOut"));
    let stats = proxy.stats();
    assert_eq!((stats.timed_out, stats.forwarded), (1, 1));
}

#[tokio::test]
async fn reset_before_is_a_connection_error_and_nothing_is_forwarded() {
    let proxy = proxy(FaultPlan {
        reset_before: 1.0,
        ..FaultPlan::none()
    })
    .await;
    let err = client()
        .get(format!("{}/Tables", proxy.endpoint()))
        .send()
        .await
        .unwrap_err();
    assert!(!err.is_timeout() && err.status().is_none(), "{err:?}");
    let stats = proxy.stats();
    assert_eq!((stats.resets_before, stats.forwarded), (1, 0));
}

#[tokio::test]
async fn reset_after_forwards_then_drops_the_reply() {
    let proxy = proxy(FaultPlan {
        reset_after: 1.0,
        ..FaultPlan::none()
    })
    .await;
    let err = client()
        .get(format!("{}/Tables", proxy.endpoint()))
        .send()
        .await
        .unwrap_err();
    assert!(!err.is_timeout() && err.status().is_none(), "{err:?}");
    let stats = proxy.stats();
    assert_eq!((stats.resets_after, stats.forwarded), (1, 1));
}

#[tokio::test]
async fn stall_outlasts_the_client_timeout() {
    let proxy = proxy(FaultPlan {
        stall: 1.0,
        stall_for: Duration::from_secs(5),
        ..FaultPlan::none()
    })
    .await;
    let started = Instant::now();
    let err = client()
        .get(format!("{}/Tables", proxy.endpoint()))
        .timeout(Duration::from_millis(300))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(proxy.stats().stalls, 1);
}

#[tokio::test]
async fn faults_stop_after_max_faults() {
    let proxy = proxy(FaultPlan {
        server_busy: 1.0,
        max_faults: Some(2),
        ..FaultPlan::none()
    })
    .await;
    let client = client();
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let resp = client
            .get(format!("{}/Tables", proxy.endpoint()))
            .send()
            .await
            .unwrap();
        statuses.push(resp.status().as_u16());
    }
    assert_eq!(statuses, [503, 503, 403, 403]);
}

#[tokio::test]
async fn same_seed_gives_the_same_schedule() {
    let plan = |seed| FaultPlan {
        seed,
        server_busy: 0.3,
        operation_timed_out: 0.2,
        ..FaultPlan::none()
    };
    let client = client();
    let mut schedules = Vec::new();
    for seed in [7, 7, 8] {
        let proxy = proxy(plan(seed)).await;
        for _ in 0..20 {
            client
                .get(format!("{}/Tables", proxy.endpoint()))
                .send()
                .await
                .unwrap();
        }
        schedules.push(proxy.schedule());
    }
    assert_eq!(schedules[0], schedules[1]);
    assert_ne!(schedules[0], schedules[2]);
    for fault in [Fault::None, Fault::ServerBusy, Fault::OperationTimedOut] {
        assert!(schedules[0].contains(&fault), "{:?}", schedules[0]);
    }
}

#[tokio::test]
async fn chunked_requests_are_rejected_with_400() {
    let proxy = proxy(FaultPlan::none()).await;
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    stream
        .write_all(
            b"POST /devstoreaccount1/Tables HTTP/1.1\r\nHost: x\r\n\
              Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        )
        .await
        .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 400 "), "{reply}");
    assert_eq!(proxy.stats().forwarded, 0);
}

#[tokio::test]
async fn dropped_proxy_stops_listening() {
    let proxy = proxy(FaultPlan::none()).await;
    let addr = proxy.addr();
    drop(proxy);
    // Let the runtime run the aborted accept loop's destructor.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(TcpStream::connect(addr).await.is_err());
}
