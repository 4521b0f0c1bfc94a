//! Metrics hub benchmark (issue: recording one attempt costs under 1 µs; 1,000,000 distinct
//! partitions in a minute cost under 32 MB).
//!
//! (a) `Hub::record` for a mix of partitions (80 % of attempts on 200 hot partitions, 20 % on
//!     a stream of ever-new ones), one thread and two threads sharing one hub.
//! (b) 1,000,000 distinct partitions recorded within one minute of record time; the hub's live
//!     heap measured by a counting global allocator.
//!
//! Run: `cargo bench --bench metrics` (RECORDS=… to change the count of (a)).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tabletop::azure::{AttemptRecord, Operation, PartitionRef};
use tabletop::config::Targets;
use tabletop::metrics::Hub;

/// `System` with a count of live and peak bytes.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn note(delta: isize) {
    let live = LIVE.fetch_add(delta, Ordering::Relaxed) + delta;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call forwards to `System` unchanged; only the byte counts are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        note(-(layout.size() as isize));
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A minute boundary a while ago: record times are controlled, the clock is later.
fn base() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(1_700_000_000);
    (now - 3600) / 60 * 60
}

fn record(sec: u64, account: &Arc<str>, table: &Arc<str>, key: String, i: usize) -> AttemptRecord {
    AttemptRecord {
        time: UNIX_EPOCH + Duration::from_secs(sec),
        account: Arc::clone(account),
        table: Some(Arc::clone(table)),
        operation: if i % 4 == 0 {
            Operation::InsertEntity
        } else {
            Operation::GetEntity
        },
        partition: PartitionRef::Key(key),
        entity_count: 1,
        // One attempt in 50 throttled, as a loaded service would answer.
        status: Some(if i % 50 == 0 { 503 } else { 200 }),
        error_code: None,
        attempt: 1 + u32::from(i % 50 == 1),
        latency: Duration::from_micros(2_000 + (i as u64 * 7919) % 50_000),
        bytes_sent: 0,
        bytes_received: 0,
        timed_out: false,
    }
}

/// `n` records of the mix (`cold_pct` % on ever-new partitions), `per_sec` per second of record
/// time from `start`.
fn mix(n: usize, start: u64, per_sec: usize, salt: usize, cold_pct: u8) -> Vec<AttemptRecord> {
    let account: Arc<str> = Arc::from("benchaccount");
    let tables: Vec<Arc<str>> = ["orders", "events", "users"]
        .iter()
        .map(|&t| Arc::from(t))
        .collect();
    let mut rng = fastrand::Rng::with_seed(42 + salt as u64);
    (0..n)
        .map(|i| {
            let key = if rng.u8(0..100) >= cold_pct {
                format!("hot-{:04}", rng.usize(0..200))
            } else {
                format!("cold-{salt}-{i:09}")
            };
            let table = &tables[rng.usize(0..tables.len())];
            record(start + (i / per_sec) as u64, &account, table, key, i)
        })
        .collect()
}

fn bench_record(threads: usize, n: usize, cold_pct: u8) -> f64 {
    let start = base();
    let hub = Arc::new(Hub::new(Targets::default(), move || {
        UNIX_EPOCH + Duration::from_secs(start + 100_000)
    }));
    // Warm the hub's slots and buckets first, so the loop measures steady state.
    for r in mix(200_000, start, 20_000, 99, cold_pct) {
        hub.record(&r);
    }
    // A working set of 16,384 records replayed, so the loop measures the hub and not the
    // cache misses of reading gigabytes of records; the cold keys (3,300 per set, more than
    // the 800 free slots) keep evicting on every replay.
    let sets: Vec<Vec<AttemptRecord>> = (0..threads)
        .map(|t| mix(16_384, start + 10, 20_000 / threads, t, cold_pct))
        .collect();
    let began = Instant::now();
    std::thread::scope(|s| {
        for set in &sets {
            let hub = Arc::clone(&hub);
            s.spawn(move || {
                for r in set.iter().cycle().take(n) {
                    hub.record(r);
                }
            });
        }
    });
    let elapsed = began.elapsed();
    elapsed.as_nanos() as f64 / n as f64
}

fn bench_memory(n: usize) {
    let start = base();
    let account: Arc<str> = Arc::from("benchaccount");
    let table: Arc<str> = Arc::from("events");
    let before = LIVE.load(Ordering::Relaxed);
    let hub = Hub::new(Targets::default(), move || {
        UNIX_EPOCH + Duration::from_secs(start + 100_000)
    });
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    let began = Instant::now();
    for i in 0..n {
        // n distinct keys over 60 s of record time (16,667 a second for 1,000,000).
        let r = record(
            start + (i * 60 / n) as u64,
            &account,
            &table,
            format!(
                "device-{:016x}",
                (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ),
            i,
        );
        hub.record(&r);
    }
    let elapsed = began.elapsed();
    let live = LIVE.load(Ordering::Relaxed) - before;
    let peak = PEAK.load(Ordering::Relaxed) - before;
    let t = Instant::now();
    let snap = hub.snapshot(
        Duration::from_secs(300),
        UNIX_EPOCH + Duration::from_secs(start + 59),
    );
    let snap_time = t.elapsed();
    let mb = |b: isize| b as f64 / (1024.0 * 1024.0);
    println!(
        "(b) {n} distinct partitions in 60 s of record time: hub heap {:.1} MiB live, \
         {:.1} MiB peak (limit 32 MiB); {:.0} ns/record (every record evicts); \
         snapshot(300 s) {:.1} ms; tracked {}, account requests {}",
        mb(live),
        mb(peak),
        elapsed.as_nanos() as f64 / n as f64,
        snap_time.as_secs_f64() * 1000.0,
        snap.tracked_partitions,
        snap.account().map_or(0, |a| a.totals.requests),
    );
    assert!(live < 32 << 20, "hub heap {live} bytes over 32 MiB");
    drop(snap);
    drop(hub);
}

fn main() {
    // `cargo test --benches` runs bench binaries with --bench absent: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n = env_usize("RECORDS", if quick { 20_000 } else { 2_000_000 });
    for (cold_pct, what) in [
        (20, "80 % on 200 hot partitions, 20 % new"),
        (0, "all tracked"),
    ] {
        for threads in [1, 2] {
            let mut runs: Vec<f64> = (0..if quick { 1 } else { 5 })
                .map(|_| bench_record(threads, n, cold_pct))
                .collect();
            runs.sort_by(|a, b| a.total_cmp(b));
            let median = runs[runs.len() / 2];
            println!(
                "(a) record ({what}), {threads} thread(s) × {n} records: {median:.0} ns/record \
                 per thread (median of {}, best {:.0}); {:.0} ns/record aggregate",
                runs.len(),
                runs[0],
                median / threads as f64
            );
        }
    }
    bench_memory(if quick { 50_000 } else { 1_000_000 });
}
