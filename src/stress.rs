//! The seeds' partition stress test (`tabletop stress` and the console's stress job): it owns a
//! throwaway table, drives one partition (or N) with rising concurrency in steps, measures each
//! step's successful entities/s, throttled % and latency, and finds the knee: the highest rate
//! sustained before throttling passes a threshold. Bounded in time and requests; the table is
//! removed on every exit path unless asked to keep it.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::azure::{
    validate, BatchOp, ClientOptions, EdmValue, Entity, RetryPolicy, TableClient, TableError,
    UpdateMode,
};

/// The service's per-partition target the knee is compared with (entities/s).
pub const DEFAULT_PARTITION_TARGET: f64 = 2000.0;
/// How often `StressEvent::Progress` is sent.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// Each step's first second is excluded from its rates (at most half the step).
const WARM_UP: Duration = Duration::from_secs(1);
/// Latency samples kept per step; beyond it every other sample is dropped (memory stays flat).
const MAX_LATENCY_SAMPLES: usize = 100_000;
/// A knee this much above what the throttled steps sustained is taken for a burst (see `find_knee`).
const BURST_MARGIN: f64 = 1.10;
/// The most entities a batch may hold (the service's limit).
const BATCH_MAX: usize = 100;

#[derive(Clone, Debug, PartialEq)]
pub struct StressConfig {
    /// Partitions written at once; workers are spread over them round-robin.
    pub partitions: usize,
    /// Concurrent writers per step, in order.
    pub steps: Vec<usize>,
    pub step_duration: Duration,
    /// A step whose throttled % is above this is "over the knee".
    pub threshold_pct: f64,
    /// No more requests than this in the whole run.
    pub max_requests: u64,
    /// The whole run (load, steps) stops after this.
    pub max_duration: Duration,
    /// Size of each entity's `Payload` string (the seeds' test used 1 KiB entities).
    pub entity_bytes: usize,
    /// RowKeys per partition the writers cycle over, so the table stays small.
    pub rows_per_partition: usize,
    /// Entities per request: 1 writes single entities; more sends batches (entity group
    /// transactions) of insert-or-replace, as in the seeds' saturation test (Figure 15).
    pub batch_size: usize,
    /// The table is named this plus a unique suffix.
    pub table_prefix: String,
    /// Leave the table in place at the end (for inspection).
    pub keep_table: bool,
    /// The per-partition target the knee is compared with.
    pub partition_target: f64,
}

impl Default for StressConfig {
    fn default() -> Self {
        StressConfig {
            partitions: 1,
            steps: vec![1, 2, 4, 8, 16, 32, 64],
            step_duration: Duration::from_secs(5),
            threshold_pct: 5.0,
            max_requests: 200_000,
            max_duration: Duration::from_secs(600),
            entity_bytes: 1024,
            rows_per_partition: 100,
            batch_size: 1,
            table_prefix: "tabletopstress".into(),
            keep_table: false,
            partition_target: DEFAULT_PARTITION_TARGET,
        }
    }
}

impl StressConfig {
    /// Rejects settings the test cannot run with, before anything is created.
    pub fn check(&self) -> Result<(), StressError> {
        let bad = |m: &str| Err(StressError::Config(m.to_string()));
        if self.partitions == 0 || self.partitions > 1000 {
            return bad("partitions must be 1 to 1,000");
        }
        if self.steps.is_empty() || self.steps.contains(&0) {
            return bad("steps must be a non-empty list of concurrencies, each at least 1");
        }
        if self.steps.iter().any(|&c| c > 1024) {
            return bad("a step's concurrency must be at most 1,024");
        }
        if self.step_duration < Duration::from_millis(500) {
            return bad("a step must last at least 0.5 s");
        }
        if !(self.threshold_pct.is_finite() && (0.0..100.0).contains(&self.threshold_pct)) {
            return bad("the throttling threshold must be a percentage from 0 to under 100");
        }
        if self.max_requests == 0 || self.max_duration.is_zero() {
            return bad("the request and time bounds must be positive");
        }
        if self.entity_bytes > 60 * 1024 {
            return bad("the payload must be at most 60 KiB (one string property)");
        }
        if self.rows_per_partition == 0 || self.rows_per_partition > 10_000 {
            return bad("rows per partition must be 1 to 10,000");
        }
        if self.batch_size == 0 || self.batch_size > BATCH_MAX {
            return bad("the batch size must be 1 to 100 entities");
        }
        if self.batch_size > self.rows_per_partition {
            return bad("a batch cannot hold more entities than the rows per partition");
        }
        if self.batch_size * (self.entity_bytes + 512) >= 4 << 20 {
            return bad("a batch of these entities would pass the service's 4 MiB request limit");
        }
        Ok(())
    }

    /// The warm-up excluded from each step's rates: the first second, at most half the step.
    pub fn warm_up(&self) -> Duration {
        WARM_UP.min(self.step_duration / 2)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StressError {
    #[error("stress: {0}")]
    Config(String),
    #[error("read-only: the stress test writes to a table of its own and is refused before anything is created")]
    ReadOnly,
    #[error("cannot create the stress table {table}: {source}")]
    Create {
        table: String,
        source: Box<TableError>,
    },
    #[error("cannot load the stress table {table}: {source}{}", cleanup_note(.cleanup))]
    Load {
        table: String,
        source: Box<TableError>,
        cleanup: Option<String>,
    },
    #[error("step {step} (concurrency {concurrency}) failed: {source}{}", cleanup_note(.cleanup))]
    Step {
        step: usize,
        concurrency: usize,
        source: Box<TableError>,
        cleanup: Option<String>,
    },
    #[error("{0}")]
    Client(Box<TableError>),
}

fn cleanup_note(cleanup: &Option<String>) -> String {
    cleanup
        .as_ref()
        .map(|c| format!(" ({c})"))
        .unwrap_or_default()
}

/// What a running test reports as it goes.
#[derive(Clone, Debug)]
pub enum StressEvent {
    /// The table exists and is loaded; steps begin.
    Started {
        table: String,
        partitions: usize,
        steps: Vec<usize>,
        step_duration: Duration,
        threshold_pct: f64,
        /// Excluded from each step's rates.
        warm_up: Duration,
    },
    /// About four times a second during a step.
    Progress(Progress),
    /// A step ended.
    Step(StepResult),
    /// The test ended (the same report `run` returns).
    Finished(StressReport),
    /// The test failed (the same error `run` returns, as text).
    Failed(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// 1-based.
    pub step: usize,
    pub concurrency: usize,
    pub elapsed: Duration,
    pub step_duration: Duration,
    pub successes_so_far: u64,
    pub attempts_so_far: u64,
    pub throttled_so_far: u64,
}

impl Progress {
    /// Successful entities per second since the step began.
    pub fn rate(&self) -> f64 {
        per_second(self.successes_so_far, self.elapsed)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct StepResult {
    /// 1-based.
    pub step: usize,
    pub concurrency: usize,
    /// The whole step, warm-up included.
    pub duration: Duration,
    /// Counts over the whole step: requests sent, and entities written by the successful ones.
    pub attempts: u64,
    pub successes: u64,
    /// 503 ServerBusy.
    pub server_busy: u64,
    /// 500 OperationTimedOut (the service's other throttling answer).
    pub operation_timeouts: u64,
    /// Everything else that failed (transport errors, other 5xx).
    pub other_errors: u64,
    /// Rates over the steady part of the step (after the warm-up): successful entities/s,
    /// requests/s, and the share of requests throttled.
    pub entities_per_s: f64,
    pub attempts_per_s: f64,
    pub throttled_pct: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The step ran its full time (not cut by a bound or a cancel).
    pub complete: bool,
    pub over_threshold: bool,
}

impl StepResult {
    pub fn throttled(&self) -> u64 {
        self.server_busy + self.operation_timeouts
    }

    /// The column heads matching `line`.
    pub fn header() -> &'static str {
        "concurrency  ok entities/s  requests/s  throttled   errors   p50 ms   p99 ms"
    }

    /// One aligned line per step, as the CLI prints it.
    pub fn line(&self) -> String {
        format!(
            "{:>11}  {:>13}  {:>10}  {:>7.1} %  {:>7}  {:>7.1}  {:>7.1}{}{}",
            self.concurrency,
            group(self.entities_per_s.round() as u64),
            group(self.attempts_per_s.round() as u64),
            self.throttled_pct,
            self.other_errors,
            self.p50_ms,
            self.p99_ms,
            if self.over_threshold { "  over" } else { "" },
            if self.complete { "" } else { "  (cut short)" },
        )
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Knee {
    /// Successful entities/s over all partitions.
    pub entities_per_s: f64,
    pub per_partition: f64,
    pub concurrency: usize,
    /// A later step went over the threshold: the limit was found, not just not reached.
    pub limited: bool,
    /// The knee step's own steady rate; above `entities_per_s` when it was capped at what the
    /// throttled steps after it sustained.
    pub measured: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StopReason {
    /// Every step ran.
    AllSteps,
    /// Two steps in a row were over the threshold: more load only means more throttling.
    OverThreshold,
    RequestBound(u64),
    TimeBound(Duration),
    Cancelled,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::AllSteps => write!(f, "every step ran"),
            StopReason::OverThreshold => {
                write!(f, "two consecutive steps were over the threshold")
            }
            StopReason::RequestBound(n) => {
                write!(f, "the request bound ({}) was reached", group(*n))
            }
            StopReason::TimeBound(d) => write!(f, "the time bound ({} s) was reached", d.as_secs()),
            StopReason::Cancelled => write!(f, "cancelled"),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct StressReport {
    pub steps: Vec<StepResult>,
    pub knee: Option<Knee>,
    pub stopped: StopReason,
    pub table: String,
    pub partitions: usize,
    pub threshold_pct: f64,
    pub partition_target: f64,
    pub warm_up: Duration,
    pub duration: Duration,
    pub requests: u64,
    /// None when the table was removed (or kept on request); otherwise why it is still there.
    pub cleanup_error: Option<String>,
    pub table_kept: bool,
}

impl StressReport {
    pub fn stopped_because(&self) -> String {
        self.stopped.to_string()
    }

    /// The knee sentence, or why there is none.
    pub fn knee_line(&self) -> String {
        let t = fmt_pct(self.threshold_pct);
        match &self.knee {
            Some(k) => {
                let per = if self.partitions > 1 {
                    format!(
                        " (~{} per partition over {} partitions)",
                        group(k.per_partition.round() as u64),
                        self.partitions
                    )
                } else {
                    String::new()
                };
                let beyond = if k.limited {
                    format!("throttling passes {t} % beyond it")
                } else {
                    format!("throttling never passed {t} %: the limit is higher than this test reached")
                };
                let capped = if k.measured > k.entities_per_s * 1.02 {
                    format!(
                        "; that step briefly reached {}/s on a burst allowance",
                        group(k.measured.round() as u64)
                    )
                } else {
                    String::new()
                };
                format!(
                    "knee: ~{} entities/s{per} at concurrency {} ({beyond}{capped})",
                    group(k.entities_per_s.round() as u64),
                    k.concurrency
                )
            }
            None => match self.steps.first() {
                Some(first) if first.complete && first.over_threshold => format!(
                    "knee: none: throttling was already over {t} % at the first step (concurrency {}, {} entities/s); start with less load",
                    first.concurrency,
                    group(first.entities_per_s.round() as u64)
                ),
                _ => "knee: none: no step completed".to_string(),
            },
        }
    }

    /// The knee against the partition target.
    pub fn target_line(&self) -> Option<String> {
        let k = self.knee.as_ref()?;
        if self.partition_target <= 0.0 {
            return None;
        }
        let pct = k.per_partition / self.partition_target * 100.0;
        let verdict = if pct >= 100.0 {
            "meets the partition target"
        } else {
            "below the partition target: spread the load over more partitions"
        };
        Some(format!(
            "that is {pct:.0} % of the partition target of {} entities/s ({verdict})",
            group(self.partition_target.round() as u64)
        ))
    }
}

impl StressReport {
    /// The first line: which table, how many partitions, what the rates exclude.
    pub fn heading(&self) -> String {
        heading(&self.table, self.partitions, self.warm_up)
    }

    /// The lines after the step table: the knee, the target, why it stopped.
    pub fn summary(&self) -> String {
        let mut lines = vec![self.knee_line()];
        lines.extend(self.target_line());
        let table = match (&self.cleanup_error, self.table_kept) {
            (Some(e), _) => format!("table {} NOT removed: {e}", self.table),
            (None, true) => format!("table {} kept", self.table),
            (None, false) => "table removed".to_string(),
        };
        lines.push(format!(
            "stopped: {} · {:.1} s · {} requests · {table}",
            self.stopped,
            self.duration.as_secs_f64(),
            group(self.requests)
        ));
        lines.join("\n")
    }
}

/// "partition stress on T (1 partition, rates exclude each step's first 1.0 s)".
pub fn heading(table: &str, partitions: usize, warm_up: Duration) -> String {
    format!(
        "partition stress on {table} ({partitions} partition{}, rates exclude each step's first {:.1} s)",
        if partitions == 1 { "" } else { "s" },
        warm_up.as_secs_f64()
    )
}

impl fmt::Display for StressReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.heading())?;
        writeln!(f, "{}", StepResult::header())?;
        for s in &self.steps {
            writeln!(f, "{}", s.line())?;
        }
        write!(f, "{}", self.summary())
    }
}

/// The knee: the highest steady successful rate among complete steps whose throttled % is
/// within the threshold. Steady rates exclude each step's warm-up, and a knee more than 10 %
/// above the best rate the over-threshold steps after it sustained is capped at that rate: under
/// throttling the successful rate is the partition's real capacity, so such an excess was a
/// burst allowance (the proxy's full bucket, spare capacity) carried over from lighter steps.
pub fn find_knee(steps: &[StepResult], partitions: usize) -> Option<Knee> {
    let best = steps
        .iter()
        .filter(|s| s.complete && !s.over_threshold)
        .max_by(|a, b| a.entities_per_s.total_cmp(&b.entities_per_s))?;
    let plateau = steps
        .iter()
        .filter(|s| s.step > best.step && s.complete && s.over_threshold)
        .map(|s| s.entities_per_s)
        .max_by(f64::total_cmp);
    let rate = match plateau {
        Some(p) if best.entities_per_s > p * BURST_MARGIN => p,
        _ => best.entities_per_s,
    };
    Some(Knee {
        entities_per_s: rate,
        per_partition: rate / partitions.max(1) as f64,
        concurrency: best.concurrency,
        limited: plateau.is_some(),
        measured: best.entities_per_s,
    })
}

/// A table name from the prefix and a unique suffix, checked against the service's rules.
pub fn table_name(prefix: &str) -> Result<String, StressError> {
    let mut name: String = prefix
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(40)
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name.insert(0, 't');
    }
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    name.push_str(&format!("{secs:x}{:06x}", fastrand::u32(..0x100_0000)));
    validate::table_name(&name).map_err(|e| StressError::Config(format!("table prefix: {e}")))?;
    Ok(name)
}

/// Runs the test on `client`'s account. Events go to `events` (a closed receiver is fine);
/// `cancel` stops the test early, and the table is still removed.
pub async fn run(
    client: &TableClient,
    config: StressConfig,
    events: UnboundedSender<StressEvent>,
    cancel: CancellationToken,
) -> Result<StressReport, StressError> {
    let result = run_inner(client, config, &events, cancel).await;
    match &result {
        Ok(report) => {
            let _ = events.send(StressEvent::Finished(report.clone()));
        }
        Err(e) => {
            let _ = events.send(StressEvent::Failed(e.to_string()));
        }
    }
    result
}

async fn run_inner(
    caller: &TableClient,
    config: StressConfig,
    events: &UnboundedSender<StressEvent>,
    cancel: CancellationToken,
) -> Result<StressReport, StressError> {
    config.check()?;
    if caller.is_read_only() {
        return Err(StressError::ReadOnly);
    }
    let client = no_retry_client(caller)?;
    let table = table_name(&config.table_prefix)?;
    let started = Instant::now();
    client
        .create_table(&table)
        .await
        .map_err(|source| StressError::Create {
            table: table.clone(),
            source: Box::new(source),
        })?;
    // From here the table exists: the guard removes it if this future is dropped mid-way, and
    // every return below goes through `finish`, which removes it explicitly.
    let mut guard = TableGuard::new(&client, &table, config.keep_table);
    let partitions: Vec<String> = (0..config.partitions)
        .map(|_| {
            uuid::Uuid::from_u128(fastrand::u128(..))
                .hyphenated()
                .to_string()
        })
        .collect();
    let payload: String = std::iter::repeat_with(fastrand::alphanumeric)
        .take(config.entity_bytes)
        .collect();
    let shared = Arc::new(Shared {
        client: client.clone(),
        table: table.clone(),
        partitions,
        payload,
        rows: config.rows_per_partition,
        batch: config.batch_size,
        requests: AtomicU64::new(0),
        max_requests: config.max_requests,
        bound_hit: AtomicBool::new(false),
    });

    let loaded = tokio::select! {
        _ = cancel.cancelled() => Ok(false),
        r = load(&shared) => r.map(|()| true),
    };
    match loaded {
        Err(source) => {
            let cleanup = guard.finish().await.err();
            return Err(StressError::Load {
                table,
                source: Box::new(source),
                cleanup,
            });
        }
        Ok(false) => {
            let cleanup_error = guard.finish().await.err();
            return Ok(StressReport {
                steps: Vec::new(),
                knee: None,
                stopped: StopReason::Cancelled,
                table,
                partitions: config.partitions,
                threshold_pct: config.threshold_pct,
                partition_target: config.partition_target,
                warm_up: config.warm_up(),
                duration: started.elapsed(),
                requests: shared.requests.load(Ordering::Relaxed),
                cleanup_error,
                table_kept: config.keep_table,
            });
        }
        Ok(true) => {}
    }
    let _ = events.send(StressEvent::Started {
        table: table.clone(),
        partitions: config.partitions,
        steps: config.steps.clone(),
        step_duration: config.step_duration,
        threshold_pct: config.threshold_pct,
        warm_up: config.warm_up(),
    });

    let deadline = started + config.max_duration;
    let mut steps: Vec<StepResult> = Vec::new();
    let mut stopped = StopReason::AllSteps;
    let mut failure: Option<(usize, usize, TableError)> = None;
    for (i, &concurrency) in config.steps.iter().enumerate() {
        if cancel.is_cancelled() {
            stopped = StopReason::Cancelled;
            break;
        }
        if Instant::now() >= deadline {
            stopped = StopReason::TimeBound(config.max_duration);
            break;
        }
        let outcome = run_step(
            &shared,
            &config,
            i + 1,
            concurrency,
            deadline,
            events,
            &cancel,
        )
        .await;
        steps.push(outcome.result.clone());
        let _ = events.send(StressEvent::Step(outcome.result));
        if let Some(e) = outcome.fatal {
            failure = Some((i + 1, concurrency, e));
            break;
        }
        if cancel.is_cancelled() {
            stopped = StopReason::Cancelled;
            break;
        }
        if shared.bound_hit.load(Ordering::Relaxed) {
            stopped = StopReason::RequestBound(config.max_requests);
            break;
        }
        if outcome.hit_deadline {
            stopped = StopReason::TimeBound(config.max_duration);
            break;
        }
        let last_two_over = steps.len() >= 2
            && steps[steps.len() - 2..]
                .iter()
                .all(|s| s.complete && s.over_threshold);
        if last_two_over {
            stopped = StopReason::OverThreshold;
            break;
        }
    }

    let cleanup_error = guard.finish().await.err();
    if let Some((step, concurrency, source)) = failure {
        return Err(StressError::Step {
            step,
            concurrency,
            source: Box::new(source),
            cleanup: cleanup_error,
        });
    }
    let knee = find_knee(&steps, config.partitions);
    Ok(StressReport {
        steps,
        knee,
        stopped,
        table,
        partitions: config.partitions,
        threshold_pct: config.threshold_pct,
        partition_target: config.partition_target,
        warm_up: config.warm_up(),
        duration: started.elapsed(),
        requests: shared.requests.load(Ordering::Relaxed),
        cleanup_error,
        table_kept: config.keep_table,
    })
}

/// The caller's account and telemetry without retries: a retried 503 would hide the very
/// throttling the test measures (and the console's dashboard still sees every attempt).
fn no_retry_client(caller: &TableClient) -> Result<TableClient, StressError> {
    let retry = RetryPolicy {
        max_attempts: 1,
        attempt_timeout: caller
            .retry_policy()
            .attempt_timeout
            .min(Duration::from_secs(10)),
        ..RetryPolicy::never()
    };
    TableClient::new(
        caller.account().clone(),
        ClientOptions {
            retry,
            read_only: caller.is_read_only(),
            telemetry: caller.telemetry().clone(),
        },
    )
    .map_err(|e| StressError::Client(Box::new(e)))
}

/// Removes the table once: explicitly through `finish`, or from `Drop` (spawned on the
/// runtime) when the test's future is dropped before it could.
struct TableGuard {
    client: TableClient,
    table: String,
    armed: bool,
}

impl TableGuard {
    fn new(client: &TableClient, table: &str, keep: bool) -> TableGuard {
        TableGuard {
            client: client.clone(),
            table: table.to_string(),
            armed: !keep,
        }
    }

    /// Deletes the table now (a few tries: it may be throttled or busy right after a step).
    async fn finish(&mut self) -> Result<(), String> {
        if !self.armed {
            return Ok(());
        }
        self.armed = false;
        let mut last = String::new();
        for attempt in 0..4u32 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(250 * u64::from(attempt))).await;
            }
            match self.client.delete_table(&self.table).await {
                Ok(()) => return Ok(()),
                Err(e) if e.is_not_found() && attempt > 0 => return Ok(()),
                Err(e) => last = e.to_string(),
            }
        }
        Err(format!(
            "could not delete it ({last}); remove it with `tabletop tables delete {} --yes`",
            self.table
        ))
    }
}

impl Drop for TableGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let client = self.client.clone();
            let table = std::mem::take(&mut self.table);
            handle.spawn(async move {
                let _ = client.delete_table(&table).await;
            });
        }
    }
}

struct Shared {
    client: TableClient,
    table: String,
    partitions: Vec<String>,
    payload: String,
    rows: usize,
    batch: usize,
    requests: AtomicU64,
    max_requests: u64,
    bound_hit: AtomicBool,
}

impl Shared {
    fn entity(&self, partition: usize, row: usize) -> Entity {
        Entity::new(self.partitions[partition].as_str(), format!("r{row:05}"))
            .with("Payload", EdmValue::String(self.payload.clone()))
    }

    /// One request: an insert-or-replace of the row after `first`, or a batch of them.
    async fn write(&self, partition: usize, first: usize) -> Result<(), TableError> {
        if self.batch == 1 {
            let entity = self.entity(partition, first % self.rows);
            return self
                .client
                .upsert(&self.table, &entity, UpdateMode::Replace)
                .await
                .map(|_| ());
        }
        // Consecutive rows modulo the row count: distinct, as a batch requires.
        let ops: Vec<BatchOp> = (first..first + self.batch)
            .map(|r| BatchOp::Upsert(self.entity(partition, r % self.rows), UpdateMode::Replace))
            .collect();
        self.client
            .submit_batch(&self.table, &ops)
            .await
            .map(|_| ())
    }

    /// Counts one request against the bound; false once the bound is spent.
    fn take_request(&self) -> bool {
        if self.requests.fetch_add(1, Ordering::Relaxed) >= self.max_requests {
            self.requests.fetch_sub(1, Ordering::Relaxed);
            self.bound_hit.store(true, Ordering::Relaxed);
            return false;
        }
        true
    }
}

/// Writes every RowKey of every partition once, in batches, so the steps replace existing
/// entities (the seeds' test wrote into a table it had prepared).
async fn load(shared: &Shared) -> Result<(), TableError> {
    for p in 0..shared.partitions.len() {
        let rows: Vec<usize> = (0..shared.rows).collect();
        for chunk in rows.chunks(BATCH_MAX) {
            let ops: Vec<BatchOp> = chunk
                .iter()
                .map(|&r| BatchOp::Upsert(shared.entity(p, r), UpdateMode::Replace))
                .collect();
            // Large payloads could pass the 4 MiB batch limit: fall back to single writes.
            let size: usize = ops.len() * (shared.payload.len() + 200);
            if size < 3 << 20 {
                if !shared.take_request() {
                    return Ok(());
                }
                shared.client.submit_batch(&shared.table, &ops).await?;
            } else {
                for &r in chunk {
                    if !shared.take_request() {
                        return Ok(());
                    }
                    shared
                        .client
                        .upsert(&shared.table, &shared.entity(p, r), UpdateMode::Replace)
                        .await?;
                }
            }
        }
    }
    Ok(())
}

#[derive(Default)]
struct Counters {
    attempts: AtomicU64,
    successes: AtomicU64,
    throttled: AtomicU64,
    steady_attempts: AtomicU64,
    steady_successes: AtomicU64,
    steady_throttled: AtomicU64,
    server_busy: AtomicU64,
    operation_timeouts: AtomicU64,
    other_errors: AtomicU64,
}

impl Counters {
    fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    fn add(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

struct StepOutcome {
    result: StepResult,
    fatal: Option<TableError>,
    hit_deadline: bool,
}

enum Answer {
    Ok,
    ServerBusy,
    OperationTimedOut,
    /// Worth going on after a pause (transport errors, other 5xx).
    Transient,
    /// Going on cannot help (auth, missing table, bad request).
    Fatal,
}

fn classify<T>(result: &Result<T, TableError>) -> Answer {
    match result {
        Ok(_) => Answer::Ok,
        // 429 is Cosmos DB's throttling answer; it counts like the service's 503.
        Err(e) if matches!(e.status(), Some(503 | 429)) => Answer::ServerBusy,
        Err(e) if e.status() == Some(500) && e.code() == Some("OperationTimedOut") => {
            Answer::OperationTimedOut
        }
        Err(TableError::Transport { .. }) => Answer::Transient,
        Err(e) if matches!(e.status(), Some(408 | 500..=599)) => Answer::Transient,
        Err(_) => Answer::Fatal,
    }
}

async fn run_step(
    shared: &Arc<Shared>,
    config: &StressConfig,
    step: usize,
    concurrency: usize,
    run_deadline: Instant,
    events: &UnboundedSender<StressEvent>,
    cancel: &CancellationToken,
) -> StepOutcome {
    let start = Instant::now();
    let planned_end = start + config.step_duration;
    let end = planned_end.min(run_deadline);
    let warm_end = start + config.warm_up();
    let counters = Arc::new(Counters::default());
    let fatal: Arc<Mutex<Option<TableError>>> = Arc::new(Mutex::new(None));
    // Stops this step's workers on cancel, a fatal error or the request bound.
    let stop = cancel.child_token();
    let mut workers = JoinSet::new();
    for w in 0..concurrency {
        let ctx = Worker {
            shared: shared.clone(),
            counters: counters.clone(),
            fatal: fatal.clone(),
            stop: stop.clone(),
            partition: w % shared.partitions.len(),
            // Workers of a partition start at different rows so they rarely write the same one.
            row: (w / shared.partitions.len()) * 7919,
            end,
            warm_end,
        };
        workers.spawn(ctx.run());
    }
    let mut latencies: Vec<f64> = Vec::new();
    let mut ticks = tokio::time::interval(PROGRESS_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    ticks.tick().await;
    loop {
        tokio::select! {
            joined = workers.join_next() => match joined {
                Some(Ok(mut lat)) => latencies.append(&mut lat),
                Some(Err(_)) => {}
                None => break,
            },
            _ = ticks.tick() => {
                let _ = events.send(StressEvent::Progress(Progress {
                    step,
                    concurrency,
                    elapsed: start.elapsed().min(config.step_duration),
                    step_duration: config.step_duration,
                    successes_so_far: Counters::get(&counters.successes),
                    attempts_so_far: Counters::get(&counters.attempts),
                    throttled_so_far: Counters::get(&counters.throttled),
                }));
            }
        }
    }
    let finished = Instant::now();
    let duration = finished - start;
    let fatal = fatal.lock().ok().and_then(|mut f| f.take());
    let complete = fatal.is_none()
        && !cancel.is_cancelled()
        && !shared.bound_hit.load(Ordering::Relaxed)
        && end == planned_end;
    // Steady rates when the step got past its warm-up; otherwise the whole step is all there is.
    let (window, attempts, successes, throttled) = if finished > warm_end + WARM_UP / 4 {
        (
            finished - warm_end,
            Counters::get(&counters.steady_attempts),
            Counters::get(&counters.steady_successes),
            Counters::get(&counters.steady_throttled),
        )
    } else {
        (
            duration,
            Counters::get(&counters.attempts),
            Counters::get(&counters.successes),
            Counters::get(&counters.throttled),
        )
    };
    let throttled_pct = if attempts == 0 {
        0.0
    } else {
        throttled as f64 * 100.0 / attempts as f64
    };
    latencies.sort_by(f64::total_cmp);
    let result = StepResult {
        step,
        concurrency,
        duration,
        attempts: Counters::get(&counters.attempts),
        successes: Counters::get(&counters.successes),
        server_busy: Counters::get(&counters.server_busy),
        operation_timeouts: Counters::get(&counters.operation_timeouts),
        other_errors: Counters::get(&counters.other_errors),
        entities_per_s: per_second(successes, window),
        attempts_per_s: per_second(attempts, window),
        throttled_pct,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        complete,
        over_threshold: throttled_pct > config.threshold_pct,
    };
    StepOutcome {
        result,
        fatal,
        hit_deadline: end < planned_end,
    }
}

struct Worker {
    shared: Arc<Shared>,
    counters: Arc<Counters>,
    fatal: Arc<Mutex<Option<TableError>>>,
    stop: CancellationToken,
    partition: usize,
    row: usize,
    end: Instant,
    warm_end: Instant,
}

impl Worker {
    /// Writes until the step ends; returns its latencies in milliseconds.
    async fn run(mut self) -> Vec<f64> {
        let mut latencies = Vec::new();
        let c = &self.counters;
        while Instant::now() < self.end && !self.stop.is_cancelled() {
            if !self.shared.take_request() {
                self.stop.cancel();
                break;
            }
            let first = self.row;
            self.row = self.row.wrapping_add(self.shared.batch);
            let sent = Instant::now();
            let result = tokio::select! {
                _ = self.stop.cancelled() => break,
                r = self.shared.write(self.partition, first) => r,
            };
            let done = Instant::now();
            if latencies.len() < MAX_LATENCY_SAMPLES {
                latencies.push((done - sent).as_secs_f64() * 1000.0);
            }
            let steady = done >= self.warm_end;
            Counters::add(&c.attempts);
            if steady {
                Counters::add(&c.steady_attempts);
            }
            let throttled = match classify(&result) {
                Answer::Ok => {
                    let n = self.shared.batch as u64;
                    c.successes.fetch_add(n, Ordering::Relaxed);
                    if steady {
                        c.steady_successes.fetch_add(n, Ordering::Relaxed);
                    }
                    continue;
                }
                Answer::ServerBusy => {
                    Counters::add(&c.server_busy);
                    true
                }
                Answer::OperationTimedOut => {
                    Counters::add(&c.operation_timeouts);
                    true
                }
                Answer::Transient => {
                    Counters::add(&c.other_errors);
                    false
                }
                Answer::Fatal => {
                    Counters::add(&c.other_errors);
                    if let (Err(e), Ok(mut slot)) = (result, self.fatal.lock()) {
                        slot.get_or_insert(e);
                    }
                    self.stop.cancel();
                    break;
                }
            };
            if throttled {
                Counters::add(&c.throttled);
                if steady {
                    Counters::add(&c.steady_throttled);
                }
            }
            // A failed writer pauses 50–100 ms before going on: it mimics a client's backoff
            // (shorter than the seeds' 3 s so a step still measures something) and keeps the
            // test from turning into a retry storm that only measures how fast 503s come back.
            let pause = Duration::from_millis(50 + fastrand::u64(..=50));
            tokio::select! {
                _ = self.stop.cancelled() => break,
                _ = tokio::time::sleep(pause.min(self.end.saturating_duration_since(Instant::now()))) => {}
            }
        }
        latencies
    }
}

fn per_second(count: u64, over: Duration) -> f64 {
    let secs = over.as_secs_f64();
    if secs <= 0.0 {
        0.0
    } else {
        count as f64 / secs
    }
}

/// The nearest-rank percentile of sorted values (0 when empty).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn fmt_pct(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}")
    } else {
        format!("{p}")
    }
}

/// 12345 → "12,345".
fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn step(step: usize, concurrency: usize, ok: f64, throttled: f64) -> StepResult {
        StepResult {
            step,
            concurrency,
            duration: Duration::from_secs(3),
            attempts: 1000,
            successes: 900,
            server_busy: 10,
            operation_timeouts: 0,
            other_errors: 0,
            entities_per_s: ok,
            attempts_per_s: ok * (1.0 + throttled / 100.0),
            throttled_pct: throttled,
            p50_ms: 1.5,
            p99_ms: 9.0,
            complete: true,
            over_threshold: throttled > 5.0,
        }
    }

    #[test]
    fn the_knee_is_the_best_rate_within_the_threshold() {
        let steps = vec![
            step(1, 1, 300.0, 0.0),
            step(2, 2, 490.0, 1.0),
            step(3, 4, 505.0, 4.0),
            step(4, 8, 510.0, 12.0),
            step(5, 16, 500.0, 30.0),
        ];
        let k = find_knee(&steps, 1).unwrap();
        assert_eq!(k.concurrency, 4);
        assert_eq!(k.entities_per_s, 505.0);
        assert!(k.limited);
        let mut cut = steps.clone();
        cut[2].complete = false;
        assert_eq!(find_knee(&cut, 1).unwrap().concurrency, 2);
        assert_eq!(find_knee(&steps[..2], 2).unwrap().per_partition, 245.0);
        assert!(!find_knee(&steps[..2], 1).unwrap().limited);
        assert!(find_knee(&steps[3..], 1).is_none());
    }

    #[test]
    fn a_burst_above_what_throttled_steps_sustain_is_capped() {
        // The proxy's full bucket let concurrency 8 reach 710/s unthrottled; 16 and 32 settle
        // at the real capacity.
        let steps = vec![
            step(1, 1, 85.0, 0.0),
            step(2, 4, 128.0, 0.0),
            step(3, 8, 710.0, 4.8),
            step(4, 16, 500.0, 25.0),
            step(5, 32, 527.0, 35.0),
        ];
        let k = find_knee(&steps, 1).unwrap();
        assert_eq!(
            (k.entities_per_s, k.concurrency, k.measured),
            (527.0, 8, 710.0)
        );
        let report = StressReport {
            knee: Some(k),
            steps,
            stopped: StopReason::OverThreshold,
            table: "t".into(),
            partitions: 1,
            threshold_pct: 5.0,
            partition_target: 2000.0,
            warm_up: Duration::from_secs(1),
            duration: Duration::from_secs(15),
            requests: 1,
            cleanup_error: None,
            table_kept: false,
        };
        assert_eq!(
            report.knee_line(),
            "knee: ~527 entities/s at concurrency 8 (throttling passes 5 % beyond it; that step briefly reached 710/s on a burst allowance)"
        );
    }

    #[test]
    fn the_report_reads_as_a_table_with_the_knee() {
        let steps = vec![
            step(1, 1, 480.0, 0.0),
            step(2, 2, 505.0, 2.0),
            step(3, 4, 500.0, 9.5),
            step(4, 8, 498.0, 20.0),
        ];
        let report = StressReport {
            knee: find_knee(&steps, 1),
            steps,
            stopped: StopReason::OverThreshold,
            table: "tabletopstress1".into(),
            partitions: 1,
            threshold_pct: 5.0,
            partition_target: 2000.0,
            warm_up: Duration::from_secs(1),
            duration: Duration::from_millis(12_300),
            requests: 6543,
            cleanup_error: None,
            table_kept: false,
        };
        let text = report.to_string();
        assert!(
            text.contains(
                "knee: ~505 entities/s at concurrency 2 (throttling passes 5 % beyond it)"
            ),
            "{text}"
        );
        assert!(
            text.contains("25 % of the partition target of 2,000 entities/s"),
            "{text}"
        );
        assert!(text.contains("stopped: two consecutive steps were over the threshold · 12.3 s · 6,543 requests · table removed"), "{text}");
        assert_eq!(
            text.lines().filter(|l| l.ends_with("over")).count(),
            2,
            "{text}"
        );
        let first_over = StressReport {
            knee: None,
            steps: vec![step(1, 1, 400.0, 40.0)],
            ..report
        };
        assert!(first_over
            .knee_line()
            .contains("already over 5 % at the first step (concurrency 1"));
    }

    #[test]
    fn names_and_settings_are_checked() {
        let name = table_name("tabletop-stress!").unwrap();
        assert!(name.starts_with("tabletopstress"), "{name}");
        assert!(validate::table_name(&name).is_ok());
        assert!(table_name("9x").unwrap().starts_with("t9x"));
        assert_ne!(table_name("a").unwrap(), table_name("a").unwrap());
        assert!(StressConfig::default().check().is_ok());
        for bad in [
            StressConfig {
                steps: vec![],
                ..StressConfig::default()
            },
            StressConfig {
                steps: vec![1, 0],
                ..StressConfig::default()
            },
            StressConfig {
                partitions: 0,
                ..StressConfig::default()
            },
            StressConfig {
                threshold_pct: f64::NAN,
                ..StressConfig::default()
            },
        ] {
            assert!(matches!(bad.check(), Err(StressError::Config(_))));
        }
        let short = StressConfig {
            step_duration: Duration::from_millis(1500),
            ..StressConfig::default()
        };
        assert_eq!(short.warm_up(), Duration::from_millis(750));
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
