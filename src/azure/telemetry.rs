//! One record per HTTP attempt, delivered to whoever subscribes (the dashboard's hub, tests).
//! With no subscriber the client skips building records, so it costs one atomic load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    ListTables,
    CreateTable,
    DeleteTable,
    QueryEntities,
    GetEntity,
    InsertEntity,
    UpdateEntity,
    MergeEntity,
    InsertOrReplace,
    InsertOrMerge,
    DeleteEntity,
    Batch,
}

impl Operation {
    pub fn name(self) -> &'static str {
        match self {
            Operation::ListTables => "ListTables",
            Operation::CreateTable => "CreateTable",
            Operation::DeleteTable => "DeleteTable",
            Operation::QueryEntities => "QueryEntities",
            Operation::GetEntity => "GetEntity",
            Operation::InsertEntity => "InsertEntity",
            Operation::UpdateEntity => "UpdateEntity",
            Operation::MergeEntity => "MergeEntity",
            Operation::InsertOrReplace => "InsertOrReplace",
            Operation::InsertOrMerge => "InsertOrMerge",
            Operation::DeleteEntity => "DeleteEntity",
            Operation::Batch => "Batch",
        }
    }

    pub fn is_write(self) -> bool {
        !matches!(
            self,
            Operation::ListTables | Operation::QueryEntities | Operation::GetEntity
        )
    }
}

/// Which partition an attempt touched.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PartitionRef {
    /// One partition, known from the URL, the body or a `PartitionKey eq` filter term.
    Key(String),
    /// A query not pinned to one partition.
    Scan,
    /// Not an entity operation (table list/create/delete).
    None,
}

#[derive(Clone, Debug)]
pub struct AttemptRecord {
    pub time: SystemTime,
    pub account: Arc<str>,
    pub table: Option<Arc<str>>,
    pub operation: Operation,
    pub partition: PartitionRef,
    /// Entities returned (queries) or written (1 for point writes, n for a batch).
    pub entity_count: u32,
    /// None when no response arrived (transport error or timeout).
    pub status: Option<u16>,
    pub error_code: Option<String>,
    /// 1 for the first attempt.
    pub attempt: u32,
    pub latency: Duration,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// The attempt ran out of time on the client side.
    pub timed_out: bool,
}

impl AttemptRecord {
    pub fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

type Sink = Arc<dyn Fn(&AttemptRecord) + Send + Sync>;

/// Fan-out of attempt records. Cheap to clone; all clones share subscribers.
#[derive(Clone, Default)]
pub struct Telemetry {
    inner: Arc<TelemetryInner>,
}

#[derive(Default)]
struct TelemetryInner {
    active: AtomicBool,
    sinks: RwLock<Vec<Sink>>,
}

impl Telemetry {
    pub fn new() -> Telemetry {
        Telemetry::default()
    }

    /// Whether anyone listens; callers skip building records otherwise.
    pub fn is_active(&self) -> bool {
        self.inner.active.load(Ordering::Relaxed)
    }

    /// Calls `sink` for every record, on the thread that made the attempt: keep it short.
    pub fn subscribe_fn(&self, sink: impl Fn(&AttemptRecord) + Send + Sync + 'static) {
        if let Ok(mut sinks) = self.inner.sinks.write() {
            sinks.push(Arc::new(sink));
            self.inner.active.store(true, Ordering::Relaxed);
        }
    }

    /// Delivers records through a channel (for a consumer on another task).
    pub fn subscribe(&self) -> tokio::sync::mpsc::UnboundedReceiver<AttemptRecord> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.subscribe_fn(move |r| {
            let _ = tx.send(r.clone());
        });
        rx
    }

    pub fn emit(&self, record: &AttemptRecord) {
        if let Ok(sinks) = self.inner.sinks.read() {
            for sink in sinks.iter() {
                sink(record);
            }
        }
    }
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Telemetry(active: {})", self.is_active())
    }
}
