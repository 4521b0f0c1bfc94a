//! The demo's sample data loaded into the shared emulator under unique table-name prefixes.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use tabletop::azure::{EdmType, EdmValue, Entity, QuerySpec, TableClient};
use tabletop::demo::{self, SampleSummary, SAMPLE_TABLES};

use crate::common::client;

/// Short enough that prefix + "DeviceTelemetry" stays within 63 characters.
fn unique_prefix() -> String {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    format!(
        "demo{:x}{:06x}{}x",
        std::process::id(),
        fastrand::u32(..0x100_0000),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

async fn load(c: &TableClient, prefix: &str) -> (SampleSummary, Vec<String>) {
    let mut lines = Vec::new();
    let started = Instant::now();
    let summary =
        demo::load_sample_data_with_prefix(c, prefix, &mut |l: &str| lines.push(l.to_string()))
            .await
            .unwrap_or_else(|e| panic!("load with prefix {prefix}: {e}"));
    eprintln!(
        "sample data loaded in {:.2} s: {:?}",
        started.elapsed().as_secs_f64(),
        summary.tables
    );
    (summary, lines)
}

async fn all_entities(c: &TableClient, table: &str) -> Vec<Entity> {
    let mut stream = c.query_stream(table, QuerySpec::default(), None, None);
    let mut out = Vec::new();
    while let Some(e) = stream.next().await {
        out.push(e.unwrap_or_else(|err| panic!("query {table}: {err}")));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sample_data_loads_completely_with_every_feature_and_exactly_as_generated() {
    let c = client();
    let first = unique_prefix();
    let (summary, lines) = load(&c, &first).await;

    // Every table, with the counts the generators promise.
    let expected: Vec<(String, usize)> = demo::sample_tables()
        .into_iter()
        .map(|t| (format!("{first}{}", t.name), t.entities.len()))
        .collect();
    assert_eq!(summary.tables, expected);
    assert!(summary.skipped.is_empty());
    let names: HashSet<String> = c.list_tables().await.unwrap().into_iter().collect();
    let logs = format!("{first}ComponentLogs");
    for (name, count) in &expected {
        assert!(names.contains(name), "{name} missing");
        // ComponentLogs is counted page by page below.
        if *name != logs {
            assert_eq!(all_entities(&c, name).await.len(), *count, "{name}");
        }
    }
    assert!(lines.iter().any(|l| l.starts_with("loading ")), "{lines:?}");

    // ComponentLogs pages for real: at least five full pages of 1,000.
    let spec = QuerySpec {
        page_size: Some(1000),
        ..QuerySpec::default()
    };
    let (mut pages, mut rows, mut from) = (0, 0, None);
    loop {
        let page = c.query_page(&logs, &spec, from.as_ref()).await.unwrap();
        pages += 1;
        rows += page.entities.len();
        match page.continuation {
            Some(next) => from = Some(next),
            None => break,
        }
    }
    assert!(rows >= 5_000, "{rows}");
    assert_eq!(Some(&(logs.clone(), rows)), expected.get(2));
    assert!(pages >= 5, "{pages} pages");

    // Within a partition the newest entry comes first.
    let partition = QuerySpec::with_filter("PartitionKey eq 'Checkout;i-02;03'");
    let mut stream = c.query_stream(&logs, partition, None, None);
    let mut previous: Option<EdmValue> = None;
    let mut seen = 0;
    while let Some(e) = stream.next().await {
        let at = e.unwrap().get("At").cloned();
        if let (Some(EdmValue::DateTime(prev)), Some(EdmValue::DateTime(now))) = (&previous, &at) {
            assert!(now < prev, "{now:?} after {prev:?}");
        }
        previous = at;
        seen += 1;
    }
    assert!(seen > 1, "partition Checkout;i-02;03 has {seen} rows");

    // Movies hold every EDM type.
    let movies = format!("{first}Movies");
    let types: HashSet<EdmType> = all_entities(&c, &movies)
        .await
        .iter()
        .flat_map(|e| e.properties.iter().map(|p| p.value.edm_type()))
        .collect();
    assert_eq!(types.len(), EdmType::ALL.len(), "{types:?}");

    // Awkward keys read back by key.
    for (pk, rk) in [
        ("Drama", "The Keeper's Daughter"),
        ("Comedy", "O'Brien's Last Stand, Part 2"),
        ("Comedy", "99% Chance of Rain"),
        ("Documentary", "Salt, Sand, and Silicon"),
        ("Animation", "東京の猫 (Tokyo Cats)"),
    ] {
        let got = c
            .get_entity(&movies, pk, rk)
            .await
            .unwrap_or_else(|e| panic!("get {pk}/{rk}: {e}"));
        assert_eq!(got.row_key, rk);
    }
    let keeper = c
        .get_entity(&movies, "Comedy", "O'Brien's Last Stand, Part 2")
        .await
        .unwrap();
    assert_eq!(
        keeper.get("Tagline"),
        Some(&EdmValue::String(String::new()))
    );
    let upcoming = c.get_entity(&movies, "SciFi", "Orbit Decay").await.unwrap();
    assert!(matches!(upcoming.get("Rating"), Some(EdmValue::Double(r)) if r.is_nan()));
    assert!(upcoming.get("BoxOffice").is_none());

    // The bib stays a string with its leading zeros.
    let marathon = format!("{first}Marathon");
    let runners = all_entities(&c, &marathon).await;
    assert!(runners
        .iter()
        .all(|e| matches!(e.get("Bib"), Some(EdmValue::String(b)) if b.len() == 5)));
    assert!(runners.iter().any(|e| e.row_key.starts_with("BIB:")
        && e.partition_key == "2026 City Marathon__Full"
        && matches!(e.get("Bib"), Some(EdmValue::String(b)) if b.starts_with('0'))));

    // What the server holds is exactly what a fresh generation produces, so every load (this
    // process or another) writes the same data; cheaper than a second 5-second load.
    for table in demo::sample_tables() {
        let name = format!("{first}{}", table.name);
        let stored = if table.name == "ComponentLogs" {
            c.query_page(&name, &spec, None).await.unwrap().entities
        } else {
            all_entities(&c, &name).await
        };
        let by_key: HashMap<(&str, &str), &Entity> = table
            .entities
            .iter()
            .map(|e| ((e.partition_key.as_str(), e.row_key.as_str()), e))
            .collect();
        for got in &stored {
            let key = (got.partition_key.as_str(), got.row_key.as_str());
            let want = by_key
                .get(&key)
                .unwrap_or_else(|| panic!("{name}: unexpected {key:?}"));
            assert!(
                got.same_content(want),
                "{name} {key:?}: {:?}",
                crate::common::diff(want, got)
            );
        }
    }

    // Loading over existing tables leaves them alone.
    let (third, notes) = load(&c, &first).await;
    assert!(third.tables.is_empty(), "{:?}", third.tables);
    assert_eq!(third.skipped.len(), SAMPLE_TABLES.len());
    assert!(
        notes.iter().all(|l| l.contains("already exists")),
        "{notes:?}"
    );
}

#[tokio::test]
async fn a_prefix_that_makes_a_bad_table_name_fails_before_creating_anything() {
    let c = client();
    let err = demo::load_sample_data_with_prefix(&c, "9bad", &mut |_: &str| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("9bad"), "{err}");
    let names = c.list_tables().await.unwrap();
    assert!(!names.iter().any(|n| n.starts_with("9bad")));
}
