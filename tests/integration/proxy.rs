//! `tabletop proxy` in front of Azurite: every request kind passes unchanged with valid
//! signatures and is attributed to the right operation and partition; `--throttle` holds a
//! partition to its rate with the service's 503 ServerBusy, leaving other partitions alone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tabletop::azure::filter::partition_filter;
use tabletop::azure::{
    Account, AttemptRecord, BatchOp, ClientOptions, Condition, EdmValue, Entity, Operation,
    PartitionRef, QuerySpec, RetryPolicy, TableClient, Telemetry, UpdateMode,
};
use tabletop::proxy::{Proxy, ProxyConfig};

use crate::common::{self, fresh_table};
use crate::support;

type Records = Arc<Mutex<Vec<AttemptRecord>>>;

async fn start_proxy(throttle: Option<f64>) -> (Proxy, Records) {
    let telemetry = Telemetry::new();
    let records: Records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    telemetry.subscribe_fn(move |r| sink.lock().unwrap().push(r.clone()));
    let proxy = Proxy::start(
        ProxyConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: format!("http://127.0.0.1:{}", support::azurite().port()),
            throttle,
            account: None,
        },
        telemetry,
    )
    .await
    .expect("proxy starts");
    (proxy, records)
}

fn no_retries() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 1,
        attempt_timeout: Duration::from_secs(10),
        ..RetryPolicy::default()
    }
}

/// (operation, table, partition, entity count, status, error code) of a record.
type Seen = (
    Operation,
    Option<String>,
    PartitionRef,
    u32,
    Option<u16>,
    Option<String>,
);

fn seen(r: &AttemptRecord) -> Seen {
    (
        r.operation,
        r.table.as_deref().map(str::to_string),
        r.partition.clone(),
        r.entity_count,
        r.status,
        r.error_code.clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_kind_passes_and_is_attributed() {
    let (proxy, records) = start_proxy(None).await;
    assert_eq!(
        proxy.table_endpoint(),
        format!("http://{}/devstoreaccount1", proxy.addr())
    );
    let (c, client_records) = common::recording_client(
        Account::development_at(&proxy.table_endpoint()),
        no_retries(),
    );
    let table = support::unique_table("px");
    let pk = "o'clock é 東京";
    let other = "other pk";
    let key = |p: &str| PartitionRef::Key(p.to_string());
    let t = Some(table.clone());

    c.create_table(&table).await.expect("create table");
    let inserted = c
        .insert(&table, &Entity::new(pk, "1").with("V", EdmValue::Int32(1)))
        .await
        .expect("insert");
    c.insert(&table, &Entity::new(other, "1"))
        .await
        .expect("insert other");
    let got = c.get_entity(&table, pk, "1").await.expect("get");
    assert_eq!(got.get("V"), Some(&EdmValue::Int32(1)));
    let replaced = c
        .update(
            &table,
            &Entity::new(pk, "1").with("V", EdmValue::Int32(2)),
            UpdateMode::Replace,
            &Condition::IfMatch(inserted.etag.clone().expect("etag")),
        )
        .await
        .expect("replace");
    c.update(
        &table,
        &Entity::new(pk, "1").with("W", EdmValue::Int32(3)),
        UpdateMode::Merge,
        &Condition::IfMatch(replaced.etag.expect("etag")),
    )
    .await
    .expect("merge");
    c.upsert(&table, &Entity::new(pk, "2"), UpdateMode::Replace)
        .await
        .expect("insert-or-replace");
    c.upsert(&table, &Entity::new(pk, "3"), UpdateMode::Merge)
        .await
        .expect("insert-or-merge");
    c.delete_entity(&table, pk, "3", &Condition::Force)
        .await
        .expect("delete");
    let page = c
        .query_page(&table, &QuerySpec::with_filter(partition_filter(pk)), None)
        .await
        .expect("partition query");
    assert_eq!(page.entities.len(), 2);
    let page = c
        .query_page(&table, &QuerySpec::default(), None)
        .await
        .expect("scan");
    assert_eq!(page.entities.len(), 3);
    c.submit_batch(
        &table,
        &[
            BatchOp::Insert(Entity::new(pk, "b1")),
            BatchOp::Upsert(
                Entity::new(pk, "1").with("X", EdmValue::Int32(4)),
                UpdateMode::Merge,
            ),
            BatchOp::Delete {
                partition_key: pk.into(),
                row_key: "2".into(),
                condition: Condition::Force,
            },
        ],
    )
    .await
    .expect("batch");
    let failed = c
        .submit_batch(
            &table,
            &[
                BatchOp::Insert(Entity::new(pk, "b2")),
                BatchOp::Insert(Entity::new(pk, "1")),
            ],
        )
        .await
        .expect_err("the second insert conflicts");
    assert_eq!(failed.code(), Some("EntityAlreadyExists"));
    let tables = c.list_tables().await.expect("list tables");
    assert!(tables.contains(&table));
    // The batch went through the proxy: its effects are there.
    let after = common::client()
        .query_page(&table, &QuerySpec::with_filter(partition_filter(pk)), None)
        .await
        .unwrap();
    let rows: Vec<_> = after.entities.iter().map(|e| e.row_key.as_str()).collect();
    assert_eq!(rows, ["1", "b1"]);
    assert_eq!(after.entities[0].get("X"), Some(&EdmValue::Int32(4)));
    c.delete_table(&table).await.expect("delete table");

    let recs = records.lock().unwrap().clone();
    let expected: Vec<Seen> = vec![
        (
            Operation::CreateTable,
            t.clone(),
            PartitionRef::None,
            0,
            Some(204),
            None,
        ),
        (
            Operation::InsertEntity,
            t.clone(),
            key(pk),
            1,
            Some(204),
            None,
        ),
        (
            Operation::InsertEntity,
            t.clone(),
            key(other),
            1,
            Some(204),
            None,
        ),
        (Operation::GetEntity, t.clone(), key(pk), 1, Some(200), None),
        (
            Operation::UpdateEntity,
            t.clone(),
            key(pk),
            1,
            Some(204),
            None,
        ),
        (
            Operation::MergeEntity,
            t.clone(),
            key(pk),
            1,
            Some(204),
            None,
        ),
        (
            Operation::InsertOrReplace,
            t.clone(),
            key(pk),
            1,
            Some(204),
            None,
        ),
        (
            Operation::InsertOrMerge,
            t.clone(),
            key(pk),
            1,
            Some(204),
            None,
        ),
        (
            Operation::DeleteEntity,
            t.clone(),
            key(pk),
            1,
            Some(204),
            None,
        ),
        (
            Operation::QueryEntities,
            t.clone(),
            key(pk),
            2,
            Some(200),
            None,
        ),
        (
            Operation::QueryEntities,
            t.clone(),
            PartitionRef::Scan,
            3,
            Some(200),
            None,
        ),
        (
            Operation::InsertEntity,
            t.clone(),
            key(pk),
            1,
            Some(204),
            None,
        ),
        (
            Operation::InsertOrMerge,
            t.clone(),
            key(pk),
            1,
            Some(204),
            None,
        ),
        (
            Operation::DeleteEntity,
            t.clone(),
            key(pk),
            1,
            Some(204),
            None,
        ),
        (
            Operation::InsertEntity,
            t.clone(),
            key(pk),
            1,
            Some(409),
            None,
        ),
        (
            Operation::InsertEntity,
            t.clone(),
            key(pk),
            1,
            Some(409),
            Some("EntityAlreadyExists".into()),
        ),
        (
            Operation::ListTables,
            None,
            PartitionRef::None,
            0,
            Some(200),
            None,
        ),
        (
            Operation::DeleteTable,
            t.clone(),
            PartitionRef::None,
            0,
            Some(204),
            None,
        ),
    ];
    let got: Vec<Seen> = recs.iter().map(seen).collect();
    assert_eq!(got.len(), expected.len(), "{got:#?}");
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "record {i}");
    }
    for r in &recs {
        assert_eq!(&*r.account, "devstoreaccount1");
        assert_eq!(r.attempt, 1);
    }
    // The client saw success for everything but the conflicting batch, each on its first attempt.
    let client_recs = client_records.lock().unwrap().clone();
    assert!(client_recs.iter().all(|r| r.attempt == 1));
    // A failed changeset still answers 202 at the HTTP level.
    assert!(client_recs.iter().all(|r| r.succeeded()));
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn throttling_holds_a_partition_to_its_rate_and_spares_the_others() {
    const RATE: f64 = 50.0;
    const RUN: Duration = Duration::from_secs(3);
    let direct = common::client();
    let table = fresh_table(&direct, "pt").await;
    let (proxy, records) = start_proxy(Some(RATE)).await;
    let c = TableClient::new(
        Account::development_at(&proxy.table_endpoint()),
        ClientOptions {
            retry: no_retries(),
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let ok = Arc::new(AtomicU64::new(0));
    let busy = Arc::new(AtomicU64::new(0));
    let other_failures = Arc::new(Mutex::new(Vec::new()));
    let seq = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let (c, table, ok, busy, seq) = (
            c.clone(),
            table.clone(),
            ok.clone(),
            busy.clone(),
            seq.clone(),
        );
        let failures = other_failures.clone();
        tasks.push(tokio::spawn(async move {
            while start.elapsed() < RUN {
                let rk = seq.fetch_add(1, Ordering::Relaxed).to_string();
                match c.insert(&table, &Entity::new("hot", rk)).await {
                    Ok(_) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.code() == Some("ServerBusy") => {
                        busy.fetch_add(1, Ordering::Relaxed);
                        // Keep offering load without spinning a core.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err(e) => failures.lock().unwrap().push(e.to_string()),
                }
            }
        }));
    }
    // A quiet partition at 20/s, below the rate: never throttled.
    let quiet = {
        let (c, table) = (c.clone(), table.clone());
        tokio::spawn(async move {
            let mut n = 0u32;
            let mut errors = Vec::new();
            while start.elapsed() < RUN {
                if let Err(e) = c.insert(&table, &Entity::new("quiet", n.to_string())).await {
                    errors.push(e.to_string());
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (n, errors)
        })
    };
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (quiet_n, quiet_errors) = quiet.await.unwrap();
    assert!(
        other_failures.lock().unwrap().is_empty(),
        "{:?}",
        other_failures.lock().unwrap()
    );
    assert!(
        quiet_errors.is_empty(),
        "the quiet partition was touched: {quiet_errors:?}"
    );
    // Timing-tolerant: under a loaded machine the quiet writer may manage fewer than 60.
    assert!(quiet_n >= 10, "quiet partition made only {quiet_n} inserts");

    let ok = ok.load(Ordering::Relaxed) as f64;
    let busy = busy.load(Ordering::Relaxed);
    // The bucket starts full (one second's burst), then refills at RATE.
    let steady = (ok - RATE) / elapsed;
    eprintln!(
        "throttle {RATE}/s over {elapsed:.2} s: {ok} ok ({:.1}/s overall, {steady:.1}/s after the burst), {busy} × 503",
        ok / elapsed
    );
    assert!(
        (steady - RATE).abs() <= RATE * 0.2,
        "steady rate {steady:.1}/s is not {RATE} ± 20 %"
    );
    assert!(busy > 100, "the load did not exceed the rate: {busy} × 503");

    // Telemetry agrees with what the clients saw.
    let recs = records.lock().unwrap().clone();
    let hot = |r: &&AttemptRecord| r.partition == PartitionRef::Key("hot".into());
    assert_eq!(
        recs.iter().filter(hot).filter(|r| r.succeeded()).count() as f64,
        ok
    );
    let throttled: Vec<_> = recs.iter().filter(|r| r.status == Some(503)).collect();
    assert_eq!(throttled.len() as u64, busy);
    assert!(throttled
        .iter()
        .all(|r| r.error_code.as_deref() == Some("ServerBusy")
            && r.partition == PartitionRef::Key("hot".into())
            && r.operation == Operation::InsertEntity));
    // What actually got stored matches the successes.
    let mut stream = direct.query_stream(
        &table,
        QuerySpec::with_filter(partition_filter("hot")),
        None,
        None,
    );
    let mut stored = 0;
    while let Some(e) = stream.next().await {
        e.unwrap();
        stored += 1;
    }
    assert_eq!(stored as f64, ok);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_request_gets_the_services_error_body() {
    let (proxy, records) = start_proxy(Some(1.0)).await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("{}/sometable", proxy.table_endpoint());
    let send = || {
        http.post(&url)
            .header("Content-Type", "application/json")
            .header("x-ms-version", "2019-02-02")
            .header("x-ms-client-request-id", "probe-1")
            .body(r#"{"PartitionKey":"p","RowKey":"r"}"#)
            .send()
    };
    // The first takes the one token (and is refused upstream: it is unsigned).
    let first = send().await.unwrap();
    assert_eq!(first.status().as_u16(), 403);
    let second = send().await.unwrap();
    assert_eq!(second.status().as_u16(), 503);
    let h = second.headers();
    assert_eq!(h["x-ms-error-code"], "ServerBusy");
    assert_eq!(h["x-ms-version"], "2019-02-02");
    assert_eq!(h["x-ms-client-request-id"], "probe-1");
    assert!(h["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    assert!(h.contains_key("x-ms-request-id"));
    let body: serde_json::Value = serde_json::from_slice(&second.bytes().await.unwrap()).unwrap();
    let err = &body["odata.error"];
    assert_eq!(err["code"], "ServerBusy");
    assert_eq!(err["message"]["lang"], "en-US");
    let value = err["message"]["value"].as_str().unwrap();
    assert!(
        value.starts_with("Operations per second is over the account limit.\nRequestId:")
            && value.contains("\nTime:"),
        "{value}"
    );
    let recs = records.lock().unwrap().clone();
    let statuses: Vec<_> = recs
        .iter()
        .map(|r| (r.status, r.error_code.clone()))
        .collect();
    assert_eq!(statuses[1], (Some(503), Some("ServerBusy".into())));
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_a_502_recorded_without_status() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let telemetry = Telemetry::new();
    let mut rx = telemetry.subscribe();
    let proxy = Proxy::start(
        ProxyConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: format!("http://127.0.0.1:{port}"),
            throttle: None,
            account: None,
        },
        telemetry,
    )
    .await
    .unwrap();
    let c = TableClient::new(
        Account::development_at(&proxy.table_endpoint()),
        ClientOptions {
            retry: no_retries(),
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let err = c.get_entity("sometable", "p", "r").await.unwrap_err();
    assert_eq!(err.service().map(|s| s.status), Some(502), "{err}");
    let r = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((r.operation, r.status), (Operation::GetEntity, None));
    proxy.stop().await;
}
