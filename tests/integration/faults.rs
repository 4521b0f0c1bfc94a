//! Retries against injected faults (503 ServerBusy, 500 OperationTimedOut, resets, stalls):
//! nothing lost, nothing duplicated, every retry recorded.

use std::net::SocketAddr;
use std::time::Duration;

use tabletop::azure::{
    Account, AttemptRecord, Condition, EdmValue, Entity, QuerySpec, RetryPolicy, UpdateMode,
};

use crate::common::{self, client, fresh_table};
use crate::support::fault_proxy::{FaultPlan, FaultProxy, FaultStats};

fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 12,
        base_delay: Duration::from_millis(5),
        min_delay: Duration::from_millis(2),
        max_delay: Duration::from_millis(50),
        attempt_timeout: Duration::from_millis(700),
    }
}

fn plan(seed: u64) -> FaultPlan {
    FaultPlan {
        seed,
        server_busy: 0.12,
        operation_timed_out: 0.08,
        reset_before: 0.05,
        reset_after: 0.06,
        stall: 0.03,
        stall_for: Duration::from_millis(1500),
        max_faults: None,
    }
}

fn upstream() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], crate::support::azurite().port()))
}

fn faults(s: &FaultStats) -> usize {
    s.server_busy + s.timed_out + s.resets_before + s.resets_after + s.stalls
}

/// Attempts that failed in a way the policy retries.
fn failed_attempts(records: &[AttemptRecord]) -> usize {
    records
        .iter()
        .filter(|r| matches!(r.status, None | Some(500) | Some(503)))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_through_faults_returns_every_entity_exactly_once() {
    let direct = client();
    let table = fresh_table(&direct, "fq").await;
    for p in 0..3 {
        for r in 0..400 {
            direct
                .insert(&table, &Entity::new(format!("p{p}"), format!("{r:04}")))
                .await
                .unwrap();
        }
    }
    let proxy = FaultProxy::start(upstream(), plan(11)).await.unwrap();
    let (c, records) =
        common::recording_client(Account::development_at(&proxy.endpoint()), fast_retries());
    let mut stream = c.query_stream(
        &table,
        QuerySpec {
            page_size: Some(50),
            ..QuerySpec::default()
        },
        None,
        None,
    );
    let mut keys = Vec::new();
    while let Some(e) = stream.next().await {
        let e = e.expect("the query survives the faults");
        keys.push(format!("{}/{}", e.partition_key, e.row_key));
    }
    assert_eq!(keys.len(), 1200);
    let mut unique = keys.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 1200, "an entity came twice");

    let stats = proxy.stats();
    let recs = records.lock().unwrap().clone();
    assert!(
        faults(&stats) >= 5,
        "the schedule injected too few faults: {stats:?}"
    );
    assert_eq!(
        failed_attempts(&recs),
        faults(&stats),
        "every fault is one recorded failed attempt: {stats:?}"
    );
    assert_eq!(
        recs.iter().filter(|r| r.attempt > 1).count(),
        faults(&stats),
        "every fault was retried once"
    );
    assert_eq!(
        recs.iter()
            .filter(|r| r.succeeded())
            .map(|r| r.entity_count as usize)
            .sum::<usize>(),
        1200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_faults_are_neither_lost_nor_duplicated() {
    let direct = client();
    let table = fresh_table(&direct, "fw").await;
    let proxy = FaultProxy::start(upstream(), plan(23)).await.unwrap();
    let (c, records) =
        common::recording_client(Account::development_at(&proxy.endpoint()), fast_retries());

    let mut earlier = 0;
    let mut etags = Vec::new();
    for i in 0..150 {
        let e = Entity::new("w", format!("{i:03}")).with("V", EdmValue::Int64(i));
        let out = c
            .insert(&table, &e)
            .await
            .unwrap_or_else(|err| panic!("insert {i}: {err}"));
        earlier += usize::from(out.probably_done_earlier);
        etags.push(out.etag.expect("etag"));
    }
    assert!(
        earlier > 0,
        "the schedule should make some inserts land before their answer was lost"
    );

    // Conditional merges with the ETags the inserts returned.
    for (i, etag) in etags.iter().enumerate() {
        let e = Entity::new("w", format!("{i:03}")).with("M", EdmValue::Boolean(true));
        c.update(
            &table,
            &e,
            UpdateMode::Merge,
            &Condition::IfMatch(etag.clone()),
        )
        .await
        .unwrap_or_else(|err| panic!("merge {i}: {err}"));
    }

    let mut all = direct.query_stream(&table, QuerySpec::default(), None, None);
    let mut n = 0;
    while let Some(e) = all.next().await {
        let e = e.unwrap();
        let i: i64 = e.row_key.parse().unwrap();
        assert_eq!(e.get("V"), Some(&EdmValue::Int64(i)));
        assert_eq!(e.get("M"), Some(&EdmValue::Boolean(true)));
        n += 1;
    }
    assert_eq!(n, 150);

    for i in 0..150 {
        c.delete_entity(&table, "w", &format!("{i:03}"), &Condition::Force)
            .await
            .unwrap_or_else(|err| panic!("delete {i}: {err}"));
    }
    assert!(direct
        .query_page(&table, &QuerySpec::default(), None)
        .await
        .unwrap()
        .entities
        .is_empty());

    let stats = proxy.stats();
    let recs = records.lock().unwrap().clone();
    assert_eq!(failed_attempts(&recs), faults(&stats), "{stats:?}");
}
