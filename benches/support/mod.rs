//! Shared pieces of the console benches: a mixed-type entity generator, an `App` wired to one
//! source, and small helpers (percentiles, RSS, env sizes). Each bench uses a subset.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use tabletop::azure::{
    edm, Account, ClientOptions, Continuation, EdmValue, Entity, EntityPage, TableClient, TablePage,
};
use tabletop::console::app::{App, AppOptions, Source, TrafficCounters};
use tabletop::console::event::{Command, Event, JobId, JobOutput};
use tabletop::console::keys::Keymap;
use tabletop::console::theme::Theme;

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// An entity with `props` properties cycling through every EDM type (strings of varied
/// length, numbers, dates, GUIDs, binaries), and a server timestamp.
pub fn entity(i: usize, props: usize) -> Entity {
    let mut e = Entity::new(format!("p{:04}", i % 1000), format!("r{i:010}"));
    e.timestamp = Some(edm::DateTime::from_ticks(
        638_600_000_000_000_000 + i as i64 * 10_007,
    ));
    for p in 0..props {
        let name = format!("Prop{p:02}");
        let v = match p % 8 {
            0 => EdmValue::String(format!("customer-{i}-{}", "x".repeat(p % 13))),
            1 => EdmValue::Int64(i as i64 * 1_000_003 + p as i64),
            2 => EdmValue::Int32((i as i32).wrapping_mul(31) + p as i32),
            3 => EdmValue::Double(i as f64 / 7.0 + p as f64),
            4 => EdmValue::Boolean((i + p) % 2 == 0),
            5 => EdmValue::DateTime(edm::DateTime::from_ticks(
                638_000_000_000_000_000 + (i * 1000 + p) as i64,
            )),
            6 => EdmValue::Guid(uuid::Uuid::from_u128(
                i as u128 * 0x9e37_79b9_7f4a_7c15 + p as u128,
            )),
            _ => EdmValue::Binary((0..(p + i % 24) as u8).collect()),
        };
        e.set(name, v);
    }
    e
}

pub fn page(start: usize, n: usize, props: usize, more: bool) -> EntityPage {
    EntityPage {
        entities: (start..start + n).map(|i| entity(i, props)).collect(),
        continuation: more.then(|| Continuation {
            next_partition_key: format!("p{:04}", (start + n) % 1000),
            next_row_key: Some(format!("r{:010}", start + n)),
        }),
    }
}

/// A console on one source (the given account) with the real default keymap and theme.
pub fn app(account: Account, page_size: u32) -> App {
    let client = TableClient::new(account, ClientOptions::default()).expect("client");
    App::new(AppOptions {
        sources: vec![Source::new("bench", Ok(client), false, None)],
        keymap: Keymap::default(),
        theme: Theme::default(),
        user_config_dir: None,
        no_color: false,
        page_size,
        traffic: Arc::new(TrafficCounters::default()),
        read_only_flag: false,
        warnings: Vec::new(),
        // Benches only read: nothing is written to this journal.
        dashboard: tabletop::console::dashboard::Dashboard::new(
            Arc::new(tabletop::metrics::Hub::new(
                tabletop::config::Targets::default(),
                std::time::SystemTime::now,
            )),
            "test traffic",
        ),
        journal: Ok(Arc::new(tabletop::journal::Journal::for_reading(
            std::env::temp_dir().join("tabletop-bench-journal.jsonl"),
        ))),
    })
}

/// The job id of the first `QueryPage` among the queued commands (the others are dropped).
pub fn query_job(app: &mut App) -> Option<JobId> {
    app.take_commands().into_iter().find_map(|c| match c {
        Command::QueryPage { job, .. } => Some(job),
        _ => None,
    })
}

/// An app (not connected to anything: its commands are answered by hand) with `table`
/// listed and open, the grid holding `rows` entities of `props` properties.
pub fn loaded_app(rows: usize, props: usize) -> App {
    let mut app = app(Account::development(), rows as u32);
    for c in app.take_commands() {
        if let Command::ListTables { job, .. } = c {
            app.update(Event::Job(
                job,
                JobOutput::Tables(Ok(TablePage {
                    names: (0..40).map(|i| format!("Table{i:03}")).collect(),
                    next_table_name: None,
                })),
            ));
        }
    }
    app.open_table(0, "Table000");
    let job = query_job(&mut app).expect("a query");
    app.update(Event::Job(
        job,
        JobOutput::Page {
            result: Ok(page(0, rows, props, true)),
            scanned: 0,
        },
    ));
    assert_eq!(app.grid.as_ref().expect("grid").rows.len(), rows);
    app
}

/// This process's resident set (VmRSS), in KiB.
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// The `q`-quantile (0..=1) of sorted durations.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// A stored entity of ~200–500 bytes on the wire: a few typed properties and a note whose
/// length varies with `i`. Partitions of 10,000 rows, so batches of 100 stay in one.
pub fn stored_entity(i: usize) -> Entity {
    Entity::new(format!("p{:04}", i / 10_000), format!("r{i:010}"))
        .with("Amount", EdmValue::Int64(i as i64 * 1_000_003))
        .with("Ratio", EdmValue::Double(i as f64 / 7.0))
        .with("Active", EdmValue::Boolean(i % 2 == 0))
        .with(
            "When",
            EdmValue::DateTime(edm::DateTime::from_ticks(
                638_000_000_000_000_000 + i as i64,
            )),
        )
        .with(
            "Id",
            EdmValue::Guid(uuid::Uuid::from_u128(i as u128 * 0x9e37_79b9)),
        )
        .with("Note", EdmValue::String("n".repeat(20 + (i * 7919) % 280)))
}

/// Loads `entities` stored entities into `table` (created first) with 100-entity batches at
/// `concurrency`; returns the elapsed time.
pub async fn load_table(
    client: &TableClient,
    table: &str,
    entities: usize,
    concurrency: usize,
) -> Duration {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tabletop::azure::BatchOp;
    client.create_table(table).await.expect("create table");
    let t0 = std::time::Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, next, done, table) = (
            client.clone(),
            next.clone(),
            done.clone(),
            table.to_string(),
        );
        set.spawn(async move {
            loop {
                let start = next.fetch_add(100, Ordering::Relaxed);
                if start >= entities {
                    break;
                }
                let end = (start + 100).min(entities);
                let ops: Vec<BatchOp> = (start..end)
                    .map(|i| BatchOp::Insert(stored_entity(i)))
                    .collect();
                client.submit_batch(&table, &ops).await.expect("batch");
                let n = done.fetch_add(end - start, Ordering::Relaxed) + end - start;
                if n % 100_000 == 0 {
                    eprintln!(
                        "  loaded {n} entities ({:.0}/s)",
                        n as f64 / t0.elapsed().as_secs_f64()
                    );
                }
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r.expect("loader task");
    }
    t0.elapsed()
}

/// Azurite keeps everything in Node's heap: give it room for big tables (unless the caller
/// chose NODE_OPTIONS), then start it.
pub fn start_emulator() -> tabletop::emulator::Emulator {
    if std::env::var_os("NODE_OPTIONS").is_none() {
        // SAFETY: called before any other thread of this process exists.
        std::env::set_var("NODE_OPTIONS", "--max-old-space-size=16384");
    }
    tabletop::emulator::Emulator::start(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{e}"))
}
