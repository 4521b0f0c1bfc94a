use super::*;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

/// A minute boundary, so the sketch's per-minute decay stays out of short tests.
const T: u64 = 1_700_000_040;

fn at(sec: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(sec)
}

/// A manual clock for tests: unix seconds in an atomic.
fn manual_clock(start: u64) -> (Arc<AtomicU64>, impl Fn() -> SystemTime + Send + Sync) {
    let now = Arc::new(AtomicU64::new(start));
    let c = Arc::clone(&now);
    (now, move || at(c.load(AtomicOrdering::Relaxed)))
}

fn hub_with(targets: Targets, config: HubConfig) -> Hub {
    // Far ahead, so no test record counts as from the future.
    let (_, clock) = manual_clock(T + 100_000);
    Hub::with_config(targets, config, clock)
}

fn hub() -> Hub {
    hub_with(Targets::default(), HubConfig::default())
}

fn rec(sec: u64, table: &str, pk: Option<&str>, entities: u32) -> AttemptRecord {
    AttemptRecord {
        time: at(sec),
        account: Arc::from("acct"),
        table: Some(Arc::from(table)),
        operation: Operation::GetEntity,
        partition: pk.map_or(PartitionRef::Scan, |k| PartitionRef::Key(k.to_string())),
        entity_count: entities,
        status: Some(200),
        error_code: None,
        attempt: 1,
        latency: Duration::from_millis(10),
        bytes_sent: 0,
        bytes_received: 0,
        timed_out: false,
    }
}

fn insert(sec: u64, table: &str, pk: &str) -> AttemptRecord {
    AttemptRecord {
        operation: Operation::InsertEntity,
        status: Some(204),
        ..rec(sec, table, Some(pk), 1)
    }
}

fn kinds(s: &Snapshot) -> Vec<WarningKind> {
    s.warnings.iter().map(|w| w.kind).collect()
}

fn sum_partitions(s: &Snapshot) -> Totals {
    let mut t = s.other;
    for p in &s.partitions {
        t.add_totals(&p.totals);
    }
    t
}

fn sum_accounts(s: &Snapshot) -> Totals {
    let mut t = Totals::default();
    for a in &s.accounts {
        t.add_totals(&a.totals);
    }
    t
}

#[test]
fn window_keeps_only_the_retention() {
    let h = hub();
    for i in 0..=400 {
        h.record(&rec(T + i, "t", Some("p"), 1));
    }
    let s = h.snapshot(Duration::from_secs(300), at(T + 400));
    let a = s.account().unwrap();
    assert_eq!(a.totals.requests, 300);
    assert_eq!(a.series.len(), 300);
    assert_eq!(a.series[0].unix_secs, T + 101);
    assert_eq!(a.series[299].unix_secs, T + 400);
    assert!(a.series.iter().all(|x| x.totals.requests == 1));
    assert_eq!(s.partitions[0].totals.requests, 300);
    assert_eq!(s.partitions[0].entities_series, vec![1; 300]);
    // A window longer than the retention is cut to it.
    let s = h.snapshot(Duration::from_secs(10_000), at(T + 400));
    assert_eq!(s.window_secs, 300);
    // A record behind the retention is dropped, not counted in a reused bucket.
    h.record(&rec(T + 50, "t", Some("p"), 1));
    let s = h.snapshot(Duration::from_secs(300), at(T + 400));
    assert_eq!(s.account().unwrap().totals.requests, 300);
    assert_eq!(s.dropped_records, 1);
    // A shorter window counts only its seconds.
    let s = h.snapshot(Duration::from_secs(60), at(T + 400));
    assert_eq!(s.account().unwrap().totals.requests, 60);
}

#[test]
fn retention_is_configurable() {
    let h = hub_with(
        Targets::default(),
        HubConfig {
            retention: Duration::from_secs(30),
            ..HubConfig::default()
        },
    );
    for i in 0..100 {
        h.record(&rec(T + i, "t", Some("p"), 1));
    }
    let s = h.snapshot(Duration::from_secs(300), at(T + 99));
    assert_eq!(s.window_secs, 30);
    assert_eq!(s.account().unwrap().totals.requests, 30);
}

#[test]
fn rates_and_percent_of_target() {
    let h = hub();
    for sec in 0..60 {
        for _ in 0..10 {
            h.record(&rec(T + sec, "orders", Some("p1"), 5));
        }
    }
    let s = h.snapshot(Duration::from_secs(60), at(T + 59));
    let a = s.account().unwrap();
    assert_eq!(a.entities_per_s, 50.0);
    assert_eq!(a.requests_per_s, 10.0);
    assert_eq!(a.pct_of_target, 50.0 * 100.0 / 20_000.0);
    let p = &s.partitions[0];
    assert_eq!(
        (p.table.as_str(), p.partition_key.as_str()),
        ("orders", "p1")
    );
    assert_eq!(p.entities_per_s, 50.0);
    assert_eq!(p.pct_of_target, 2.5);
    assert!(p.exact);
    assert_eq!(p.entities_series.len(), 60);
    assert!(p.entities_series.iter().all(|&e| e == 50));
    // The window's second of `now` counts; seconds after it do not.
    let s = h.snapshot(Duration::from_secs(10), at(T + 29));
    assert_eq!(s.account().unwrap().totals.requests, 100);
}

#[test]
fn classification() {
    let h = hub();
    let base = rec(T, "t", Some("p"), 3);
    let cases = [
        AttemptRecord { ..base.clone() },
        AttemptRecord {
            status: Some(503),
            error_code: Some("ServerBusy".into()),
            ..base.clone()
        },
        AttemptRecord {
            status: Some(500),
            error_code: Some("OperationTimedOut".into()),
            attempt: 2,
            ..base.clone()
        },
        AttemptRecord {
            status: Some(500),
            error_code: Some("InternalError".into()),
            ..base.clone()
        },
        AttemptRecord {
            status: None,
            timed_out: true,
            attempt: 3,
            ..base.clone()
        },
        AttemptRecord {
            status: None,
            timed_out: false,
            ..base.clone()
        },
        AttemptRecord {
            status: Some(404),
            error_code: Some("ResourceNotFound".into()),
            ..base.clone()
        },
    ];
    for c in &cases {
        h.record(c);
    }
    let s = h.snapshot(Duration::from_secs(60), at(T));
    let t = s.account().unwrap().totals;
    assert_eq!(
        t,
        Totals {
            requests: 7,
            entities: 3,
            successes: 1,
            server_busy: 1,
            server_timeouts: 1,
            client_timeouts: 1,
            other_errors: 3,
            retries: 2,
        }
    );
    assert_eq!(t.throttled(), 2);
    assert!((t.throttled_pct() - 200.0 / 7.0).abs() < 1e-9);
    assert_eq!(s.partitions[0].totals, t);
}

#[test]
fn latency_percentiles() {
    let h = hub();
    for ms in 1..=100u64 {
        h.record(&AttemptRecord {
            latency: Duration::from_millis(ms),
            ..rec(T, "t", Some("p"), 1)
        });
    }
    let s = h.snapshot(Duration::from_secs(60), at(T));
    let a = s.account().unwrap();
    let (p50, p99) = (a.p50_ms.unwrap(), a.p99_ms.unwrap());
    assert!((p50 - 50.0).abs() / 50.0 < 0.02, "{p50}");
    assert!((p99 - 99.0).abs() / 99.0 < 0.02, "{p99}");
    let p = &s.partitions[0];
    let (p50, p99) = (p.p50_ms.unwrap(), p.p99_ms.unwrap());
    assert!((p50 - 50.0).abs() / 50.0 < 0.15, "{p50}");
    assert!((p99 - 99.0).abs() / 99.0 < 0.15, "{p99}");
}

#[test]
fn ranking_with_more_partitions_than_capacity() {
    let config = HubConfig {
        capacity: 10,
        top_n: 5,
        ..HubConfig::default()
    };
    let h = hub_with(Targets::default(), config);
    // 5 heavy partitions (100 × 10 entities each) interleaved with 300 light ones.
    let mut light = 0;
    for round in 0..100u64 {
        for heavy in 0..5 {
            h.record(&rec(
                T + round / 10,
                "t",
                Some(&format!("heavy{heavy}")),
                10,
            ));
        }
        for _ in 0..3 {
            h.record(&rec(T + round / 10, "t", Some(&format!("light{light}")), 1));
            light += 1;
        }
    }
    let s = h.snapshot(Duration::from_secs(60), at(T + 9));
    assert_eq!(s.tracked_partitions, 10);
    assert_eq!(s.partitions.len(), 5);
    let mut names: Vec<&str> = s
        .partitions
        .iter()
        .map(|p| p.partition_key.as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["heavy0", "heavy1", "heavy2", "heavy3", "heavy4"]);
    for p in &s.partitions {
        assert_eq!(p.totals.entities, 1000, "{}", p.partition_key);
        assert_eq!(p.totals.requests, 100);
    }
    assert_eq!(sum_partitions(&s), sum_accounts(&s));
    assert_eq!(s.other.entities, 300);
    assert_eq!(s.account().unwrap().totals.entities, 5300);

    // Ranked by throttled count, a throttled light partition comes first.
    for _ in 0..3 {
        h.record(&AttemptRecord {
            status: Some(503),
            ..rec(T + 9, "t", Some("busy"), 1)
        });
    }
    let s = h.snapshot_by(Duration::from_secs(60), at(T + 9), RankBy::Throttled);
    assert_eq!(s.partitions[0].partition_key, "busy");
    assert_eq!(s.partitions[0].totals.server_busy, 3);
    assert_eq!(sum_partitions(&s), sum_accounts(&s));
}

#[test]
fn evicted_slot_does_not_leak_counts_into_its_successor() {
    let config = HubConfig {
        capacity: 1,
        ..HubConfig::default()
    };
    let h = hub_with(Targets::default(), config);
    h.record(&rec(T, "t", Some("a"), 7));
    h.record(&rec(T, "t", Some("b"), 1));
    let s = h.snapshot(Duration::from_secs(60), at(T));
    assert_eq!(s.partitions.len(), 1);
    assert_eq!(s.partitions[0].partition_key, "b");
    assert_eq!(s.partitions[0].totals.entities, 1);
    assert_eq!(s.other.entities, 7);
    assert_eq!(sum_partitions(&s), sum_accounts(&s));
}

#[test]
fn sketch_decays_so_new_heavy_partitions_displace_old_ones() {
    let config = HubConfig {
        capacity: 2,
        ..HubConfig::default()
    };
    let h = hub_with(Targets::default(), config);
    for _ in 0..100 {
        h.record(&rec(T, "t", Some("old1"), 10));
        h.record(&rec(T, "t", Some("old2"), 10));
    }
    // Ten minutes later, two new partitions carry the traffic.
    for i in 0..50 {
        h.record(&rec(T + 600 + i / 10, "t", Some("new1"), 10));
        h.record(&rec(T + 600 + i / 10, "t", Some("new2"), 10));
    }
    let s = h.snapshot(Duration::from_secs(60), at(T + 610));
    let mut names: Vec<&str> = s
        .partitions
        .iter()
        .map(|p| p.partition_key.as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["new1", "new2"]);
}

#[test]
fn long_keys_are_truncated_at_a_char_boundary() {
    let h = hub();
    let key = "é".repeat(200); // 400 bytes
    h.record(&rec(T, "t", Some(&key), 1));
    h.record(&rec(T, "t", Some(&format!("{key}x")), 1));
    let s = h.snapshot(Duration::from_secs(60), at(T));
    assert_eq!(s.partitions.len(), 1, "both truncate to the same key");
    let p = &s.partitions[0];
    assert!(p.key_truncated);
    assert_eq!(p.partition_key.len(), 256);
    assert_eq!(p.totals.requests, 2);
}

#[test]
fn records_from_the_future_are_dropped() {
    let (now, clock) = manual_clock(T);
    let h = Hub::new(Targets::default(), clock);
    h.record(&rec(T + 10_000, "t", Some("p"), 1));
    assert_eq!(h.snapshot_now(Duration::from_secs(60)).dropped_records, 1);
    h.record(&rec(T, "t", Some("p"), 1));
    now.store(T + 5, AtomicOrdering::Relaxed);
    let s = h.snapshot_now(Duration::from_secs(60));
    assert_eq!(s.account().unwrap().totals.requests, 1);
    assert_eq!(s.now_unix_secs, T + 5);
}

#[test]
fn hot_partition_and_account_over_target() {
    let targets = Targets {
        partition_entities_per_s: 2000,
        account_entities_per_s: 4000,
    };
    let h = hub_with(targets, HubConfig::default());
    for sec in 0..10 {
        // hot: 2,500/s; warm: 1,500/s; together 4,000/s, exactly the account target.
        for _ in 0..25 {
            h.record(&rec(T + sec, "orders", Some("hot"), 100));
        }
        for _ in 0..15 {
            h.record(&rec(T + sec, "orders", Some("warm"), 100));
        }
    }
    let s = h.snapshot(Duration::from_secs(10), at(T + 9));
    assert_eq!(kinds(&s), [WarningKind::HotPartition]);
    let w = &s.warnings[0];
    assert!(
        w.subject.contains("orders/hot") && w.subject.contains("2,500 entities/s"),
        "{}",
        w.subject
    );
    assert!(w.subject.contains("125 % of 2,000"), "{}", w.subject);
    assert!(w.why.contains("503 ServerBusy"));
    assert_eq!(s.partitions[0].pct_of_target, 125.0);

    h.record(&rec(T + 9, "orders", Some("warm"), 100));
    let s = h.snapshot(Duration::from_secs(10), at(T + 9));
    assert_eq!(
        kinds(&s),
        [WarningKind::HotPartition, WarningKind::AccountOverTarget]
    );
    assert!(s.warnings[1].subject.contains("account acct"));
    // Over a longer window the same traffic averages below both targets.
    let s = h.snapshot(Duration::from_secs(60), at(T + 9));
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
}

#[test]
fn append_and_prepend_only_patterns() {
    let h = hub();
    for i in 0..60u64 {
        h.record(&insert(T, "logs", &format!("2024-06-01T00:{i:02}")));
        h.record(&insert(T, "rev", &format!("{:05}", 99_999 - i)));
        // Random-looking order: a multiplicative permutation of 0..61.
        h.record(&insert(T, "random", &format!("{:03}", (i * 37) % 61)));
        // One key over and over: no new keys, so no pattern (hot partition covers it).
        h.record(&insert(T, "same", "k"));
    }
    let s = h.snapshot(Duration::from_secs(60), at(T));
    assert_eq!(
        kinds(&s),
        [WarningKind::AppendOnly, WarningKind::PrependOnly],
        "{:?}",
        s.warnings
    );
    assert!(s.warnings[0].subject.starts_with("table logs: 59 of 59"));
    assert!(s.warnings[1].subject.starts_with("table rev:"));
    assert!(s.warnings[0].why.contains("last range partition"));

    // Too few inserts: nothing.
    let h = hub();
    for i in 0..30u64 {
        h.record(&insert(T, "logs", &format!("{i:03}")));
    }
    assert!(h
        .snapshot(Duration::from_secs(60), at(T))
        .warnings
        .is_empty());

    // Retries of an insert are not new inserts; reads do not count.
    let h = hub();
    for i in 0..60u64 {
        h.record(&AttemptRecord {
            attempt: 2,
            ..insert(T, "logs", &format!("{i:03}"))
        });
        h.record(&rec(T, "logs", Some(&format!("{i:03}")), 1));
    }
    assert!(h
        .snapshot(Duration::from_secs(60), at(T))
        .warnings
        .is_empty());
}

#[test]
fn table_scans() {
    let h = hub();
    h.record(&rec(T, "orders", Some("p"), 1));
    h.record(&AttemptRecord {
        operation: Operation::QueryEntities,
        ..rec(T, "orders", Some("p"), 10)
    });
    let s = h.snapshot(Duration::from_secs(60), at(T));
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert_eq!(s.scans.queries, 0);

    for (table, n) in [("orders", 3), ("users", 1)] {
        for _ in 0..n {
            h.record(&AttemptRecord {
                operation: Operation::QueryEntities,
                ..rec(T, table, None, 1000)
            });
        }
    }
    let s = h.snapshot(Duration::from_secs(60), at(T));
    assert_eq!(kinds(&s), [WarningKind::TableScan]);
    assert_eq!(s.scans.queries, 4);
    assert_eq!(s.scans.entities, 4000);
    assert_eq!(s.scans.tables[0].table, "orders");
    assert_eq!(s.scans.tables[0].queries, 3);
    assert_eq!(
        s.warnings[0].subject,
        "4 scan queries returning 4,000 entities: orders (3), users (1)"
    );
    // Scans count in the account and in "other", never in a partition.
    assert_eq!(sum_partitions(&s), sum_accounts(&s));
    assert_eq!(s.account().unwrap().totals.entities, 4011);
}

#[test]
fn retry_storm() {
    let storm = |retries_per_s: u32, attempts_per_s: u32, seconds: u64| {
        let h = hub();
        for sec in 0..seconds {
            for i in 0..attempts_per_s {
                h.record(&AttemptRecord {
                    attempt: if i < retries_per_s { 2 } else { 1 },
                    status: Some(503),
                    ..rec(T + sec, "t", Some("p"), 1)
                });
            }
        }
        h.snapshot(Duration::from_secs(60), at(T + 59))
    };
    let s = storm(20, 50, 5);
    assert_eq!(kinds(&s), [WarningKind::RetryStorm]);
    assert!(
        s.warnings[0]
            .subject
            .contains("100 retries (40 % of attempts)"),
        "{}",
        s.warnings[0].subject
    );
    assert!(s.warnings[0].why.contains("backoff"));
    // A low share of retries is backoff working; a blip of two seconds is not sustained;
    // few retries per second are not a storm.
    assert!(storm(15, 100, 5).warnings.is_empty());
    assert!(storm(20, 50, 2).warnings.is_empty());
    assert!(storm(5, 6, 30).warnings.is_empty());
}

#[test]
fn several_accounts_and_table_operations() {
    let h = hub();
    h.record(&rec(T, "t", Some("p"), 2));
    h.record(&AttemptRecord {
        account: Arc::from("second"),
        ..rec(T, "t", Some("p"), 1)
    });
    h.record(&AttemptRecord {
        operation: Operation::ListTables,
        table: None,
        partition: PartitionRef::None,
        entity_count: 0,
        ..rec(T, "t", None, 0)
    });
    let s = h.snapshot(Duration::from_secs(60), at(T));
    assert_eq!(s.accounts.len(), 2);
    assert_eq!(s.accounts[0].account, "acct");
    assert_eq!(s.accounts[0].totals.requests, 2);
    assert_eq!(s.partitions.len(), 2);
    assert_eq!(s.partitions[1].account, "second");
    assert_eq!(s.other.requests, 1);
    assert_eq!(sum_partitions(&s), sum_accounts(&s));
}

#[test]
fn accounts_and_tables_are_bounded() {
    let config = HubConfig {
        max_accounts: 3,
        max_tables: 3,
        ..HubConfig::default()
    };
    let h = hub_with(Targets::default(), config);
    for i in 0..10 {
        h.record(&AttemptRecord {
            account: Arc::from(format!("a{i}").as_str()),
            ..rec(T, "t", None, 1)
        });
        h.record(&AttemptRecord {
            operation: Operation::QueryEntities,
            ..rec(T, &format!("table{i}"), None, 1)
        });
    }
    let s = h.snapshot(Duration::from_secs(60), at(T));
    assert_eq!(s.accounts.len(), 3);
    assert!(s.accounts.iter().any(|a| a.account == OTHER_ACCOUNTS));
    assert_eq!(sum_accounts(&s).requests, 20);
    assert!(s.scans.tables.len() <= 3);
    assert!(s.scans.tables.iter().any(|t| t.table == OTHER_TABLES));
    assert_eq!(s.scans.queries, 10);
}

#[test]
fn attach_records_from_many_threads() {
    let h = Arc::new(hub());
    let telemetry = Telemetry::new();
    h.attach(&telemetry);
    assert!(telemetry.is_active());
    let threads: Vec<_> = (0..4)
        .map(|n| {
            let telemetry = telemetry.clone();
            std::thread::spawn(move || {
                for i in 0..1000 {
                    telemetry.emit(&rec(T, "t", Some(&format!("p{n}-{}", i % 7)), 1));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = h.snapshot(Duration::from_secs(60), at(T));
    assert_eq!(s.account().unwrap().totals.requests, 4000);
    assert_eq!(s.tracked_partitions, 28);
    assert_eq!(sum_partitions(&s), sum_accounts(&s));
}

#[test]
fn exports() {
    let h = hub();
    for sec in 0..3 {
        h.record(&rec(T + sec, "orders", Some("a,\"quoted\""), 4));
        h.record(&AttemptRecord {
            status: Some(503),
            ..rec(T + sec, "orders", Some("b"), 1)
        });
    }
    h.record(&AttemptRecord {
        operation: Operation::QueryEntities,
        ..rec(T + 2, "orders", None, 9)
    });
    let s = h.snapshot(Duration::from_secs(3), at(T + 2));

    let json: serde_json::Value = serde_json::from_str(&s.to_json().unwrap()).unwrap();
    assert_eq!(json["window_secs"], 3);
    assert_eq!(json["rank_by"], "entities");
    assert_eq!(json["accounts"][0]["account"], "acct");
    assert_eq!(json["accounts"][0]["totals"]["server_busy"], 3);
    assert_eq!(json["accounts"][0]["series"][2]["requests"], 3);
    assert_eq!(json["accounts"][0]["series"][2]["unix_secs"], T + 2);
    assert_eq!(json["partitions"][0]["partition_key"], "a,\"quoted\"");
    assert_eq!(json["partitions"][0]["entities_per_s"], 4.0);
    assert_eq!(json["other"]["entities"], 9);
    assert_eq!(json["warnings"][0]["kind"], "table_scan");
    assert!(json["warnings"][0]["why"]
        .as_str()
        .unwrap()
        .contains("scan"));
    assert_eq!(
        json["partitions"][0]["p50_ms"].as_f64().map(|v| v > 9.0),
        Some(true)
    );

    let csv_text = s.to_csv().unwrap();
    let mut reader = csv::Reader::from_reader(csv_text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    assert_eq!(&headers[0], "kind");
    assert_eq!(headers.len(), 19);
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    let kinds: Vec<&str> = rows.iter().map(|r| &r[0]).collect();
    assert_eq!(
        kinds,
        [
            "account",
            "partition",
            "partition",
            "other",
            "second",
            "second",
            "second"
        ]
    );
    assert_eq!(&rows[1][4], "a,\"quoted\"");
    assert_eq!(&rows[1][6], "12");
    assert_eq!(&rows[1][13], "4.000");
    assert_eq!(&rows[2][8], "3");
    assert_eq!(&rows[2][15], "100.000");
    assert_eq!(&rows[6][1], (T + 2).to_string());
    assert_eq!(&rows[6][5], "3");
}

#[test]
fn default_targets_are_the_current_guidance() {
    let h = Hub::new(Targets::default(), SystemTime::now);
    assert_eq!(h.targets().partition_entities_per_s, 2000);
    assert_eq!(h.targets().account_entities_per_s, 20_000);
    let s = h.snapshot_now(Duration::from_secs(60));
    assert!(s.accounts.is_empty() && s.partitions.is_empty() && s.warnings.is_empty());
    assert_eq!((s.partition_target, s.account_target), (2000, 20_000));
}

#[test]
fn a_partition_throttled_at_its_limit_is_hot_even_below_the_target() {
    let targets = Targets {
        partition_entities_per_s: 100,
        account_entities_per_s: 20_000,
    };
    let h = hub_with(targets, HubConfig::default());
    for sec in 0..10 {
        // 95 successes and 30 ServerBusy a second: the limit holds it just under its target.
        for _ in 0..95 {
            h.record(&insert(T + sec, "t", "capped"));
        }
        for _ in 0..30 {
            h.record(&AttemptRecord {
                status: Some(503),
                error_code: Some("ServerBusy".into()),
                ..insert(T + sec, "t", "capped")
            });
        }
        // A busy partition well below its target and never throttled is not hot.
        for _ in 0..60 {
            h.record(&insert(T + sec, "t", "calm"));
        }
    }
    let s = h.snapshot(Duration::from_secs(10), at(T + 9));
    let hot: Vec<&str> = s
        .warnings
        .iter()
        .filter(|w| w.kind == WarningKind::HotPartition)
        .map(|w| w.subject.as_str())
        .collect();
    assert_eq!(hot.len(), 1, "{hot:?}");
    assert!(
        hot[0].contains("t/capped") && hot[0].contains("throttled"),
        "{}",
        hot[0]
    );
}
