//! The Table service client: builds, signs and sends every request with retries, timeouts and
//! one telemetry record per attempt; tables, entity queries (page by page or as a prefetching
//! stream) and conditional writes.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::Method;
use tokio::sync::{mpsc, oneshot};

use super::auth;
use super::batch::{self, BatchOp};
use super::connection::{Account, Credential};
use super::edm::{self, Entity};
use super::error::{decode_service_error, Result, TableError};
use super::filter;
use super::retry::{is_retryable_status, RetryPolicy};
use super::telemetry::{AttemptRecord, Operation, PartitionRef, Telemetry};
use super::validate;

const API_VERSION: &str = "2019-02-02";
const ACCEPT: &str = "application/json;odata=minimalmetadata";
const JSON: &str = "application/json";
/// The service caps a page at 1,000 entities.
pub const MAX_PAGE_SIZE: u32 = 1000;

/// RFC 3986 unreserved characters stay; everything else is percent-encoded.
const ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn encode(s: &str) -> String {
    utf8_percent_encode(s, ENCODE).to_string()
}

/// `Table(PartitionKey='…',RowKey='…')` with quotes doubled and everything else encoded.
pub fn entity_path(table: &str, partition_key: &str, row_key: &str) -> String {
    format!(
        "/{table}(PartitionKey='{}',RowKey='{}')",
        encode(&partition_key.replace('\'', "''")),
        encode(&row_key.replace('\'', "''"))
    )
}

#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub retry: RetryPolicy,
    /// Every write fails before it is sent.
    pub read_only: bool,
    pub telemetry: Telemetry,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            retry: RetryPolicy::default(),
            read_only: false,
            telemetry: Telemetry::new(),
        }
    }
}

/// The position after a page: the `NextPartitionKey` / `NextRowKey` pair (opaque values).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Continuation {
    pub next_partition_key: String,
    pub next_row_key: Option<String>,
}

impl Continuation {
    fn from_headers(headers: &HeaderMap) -> Option<Continuation> {
        let get = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Some(Continuation {
            next_partition_key: get("x-ms-continuation-nextpartitionkey")?,
            next_row_key: get("x-ms-continuation-nextrowkey"),
        })
    }

    /// The same position as `az storage entity query --marker` takes it.
    pub fn as_az_marker(&self) -> String {
        let mut s = format!("nextpartitionkey={}", self.next_partition_key);
        if let Some(rk) = &self.next_row_key {
            s.push_str(&format!(" nextrowkey={rk}"));
        }
        s
    }
}

/// What to query: an OData filter, a projection and the per-request page size.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuerySpec {
    pub filter: Option<String>,
    /// Property names; PartitionKey and RowKey are always added so entities stay addressable.
    pub select: Option<Vec<String>>,
    /// `$top` of each request (1..=1000); None lets the service choose (1,000).
    pub page_size: Option<u32>,
}

impl QuerySpec {
    pub fn with_filter(filter: impl Into<String>) -> QuerySpec {
        QuerySpec {
            filter: Some(filter.into()),
            ..QuerySpec::default()
        }
    }

    fn query_string(&self) -> Result<String> {
        let mut parts = Vec::new();
        if let Some(f) = self
            .filter
            .as_deref()
            .map(str::trim)
            .filter(|f| !f.is_empty())
        {
            parts.push(format!("$filter={}", encode(f)));
        }
        if let Some(select) = &self.select {
            let mut names: Vec<&str> = vec!["PartitionKey", "RowKey"];
            for name in select.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
                if name != "Timestamp" {
                    validate::property_name(name).or_else(|e| {
                        if matches!(name, "PartitionKey" | "RowKey") {
                            Ok(())
                        } else {
                            Err(e)
                        }
                    })?;
                }
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            parts.push(format!("$select={}", encode(&names.join(","))));
        }
        if let Some(n) = self.page_size {
            if !(1..=MAX_PAGE_SIZE).contains(&n) {
                return Err(validate_err(
                    "page size",
                    format!("must be 1 to {MAX_PAGE_SIZE} (it is {n})"),
                ));
            }
            parts.push(format!("$top={n}"));
        }
        Ok(parts.join("&"))
    }

    fn partition(&self) -> PartitionRef {
        match self.filter.as_deref().map(filter::parse) {
            Some(Ok(expr)) => match filter::single_partition(&expr) {
                Some(pk) => PartitionRef::Key(pk.to_string()),
                None => PartitionRef::Scan,
            },
            _ => PartitionRef::Scan,
        }
    }
}

fn validate_err(field: &str, rule: String) -> TableError {
    TableError::Invalid(super::error::ValidationError::new(field, rule))
}

/// One page of a query and where the next one starts.
#[derive(Clone, Debug, Default)]
pub struct EntityPage {
    pub entities: Vec<Entity>,
    pub continuation: Option<Continuation>,
}

/// One page of table names.
#[derive(Clone, Debug, Default)]
pub struct TablePage {
    pub names: Vec<String>,
    pub next_table_name: Option<String>,
}

/// The ETag condition of a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    /// Only if the entity still has this ETag.
    IfMatch(String),
    /// Unconditional (`If-Match: *`): only on an explicit, confirmed force.
    Force,
}

impl Condition {
    fn header(&self) -> &str {
        match self {
            Condition::IfMatch(etag) => etag,
            Condition::Force => "*",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateMode {
    /// Replace every property (removes the ones not given).
    Replace,
    /// Merge the given properties into the entity (cannot remove properties).
    Merge,
}

/// The result of a write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The entity's new ETag (none after a delete).
    pub etag: Option<String>,
    /// HTTP attempts it took.
    pub attempts: u32,
    /// Set when a retry met the effect of an earlier attempt (409 after an insert, 404 after a
    /// delete, 412 after an update) and a check showed the write had in fact been applied.
    pub probably_done_earlier: bool,
}

impl WriteOutcome {
    pub fn note(&self) -> Option<&'static str> {
        self.probably_done_earlier
            .then_some("a retry found the change already in place: it was probably applied by an earlier attempt whose answer was lost")
    }
}

/// A response after retries: final status, headers and body.
struct RawResponse {
    status: u16,
    headers: HeaderMap,
    body: Bytes,
    attempts: u32,
    /// The final attempt's record, held back so the caller can add the entity count.
    record: Option<AttemptRecord>,
}

impl RawResponse {
    fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    fn into_error(self) -> TableError {
        TableError::Service(decode_service_error(
            self.status,
            self.header("x-ms-error-code"),
            self.header("x-ms-request-id"),
            &self.body,
        ))
    }

    /// A write's result: its new ETag, or the service's error.
    fn into_write_outcome(self) -> Result<WriteOutcome> {
        let attempts = self.attempts;
        let raw = self.error_if_failed()?;
        Ok(WriteOutcome {
            etag: raw.header("etag"),
            attempts,
            probably_done_earlier: false,
        })
    }

    fn error_if_failed(self) -> Result<RawResponse> {
        if self.is_success() {
            Ok(self)
        } else {
            Err(self.into_error())
        }
    }
}

struct Request {
    method: Method,
    /// Encoded path relative to the endpoint, starting with `/`.
    path: String,
    /// Encoded query without `?`.
    query: String,
    body: Option<String>,
    /// Content-Type of the body (JSON unless set).
    content_type: Option<String>,
    extra_headers: Vec<(&'static str, String)>,
    operation: Operation,
    table: Option<Arc<str>>,
    partition: PartitionRef,
    entity_count: u32,
    /// Receives the continuation as soon as a successful attempt's headers arrive.
    on_headers: Option<oneshot::Sender<Option<Continuation>>>,
    /// The caller emits the final record itself (it knows the entity count).
    defer_final_record: bool,
}

impl Request {
    fn new(method: Method, path: String, operation: Operation) -> Request {
        Request {
            method,
            path,
            query: String::new(),
            body: None,
            content_type: None,
            extra_headers: Vec::new(),
            operation,
            table: None,
            partition: PartitionRef::None,
            entity_count: 0,
            on_headers: None,
            defer_final_record: false,
        }
    }
}

struct ClientInner {
    http: reqwest::Client,
    account: Account,
    account_label: Arc<str>,
    options: ClientOptions,
}

/// A cheap-to-clone handle; clones share the connection pool and telemetry.
#[derive(Clone)]
pub struct TableClient {
    inner: Arc<ClientInner>,
}

impl std::fmt::Debug for TableClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TableClient({})", self.inner.account.describe())
    }
}

impl TableClient {
    pub fn new(account: Account, options: ClientOptions) -> Result<TableClient> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("tabletop/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            // Node (Azurite) closes idle keep-alive sockets after 5 s; reusing one as it closes
            // would cost a spurious transport error.
            .pool_idle_timeout(Duration::from_secs(4))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| TableError::Transport {
                message: format!("cannot create the HTTP client: {}", e.without_url()),
                timed_out: false,
            })?;
        let account_label: Arc<str> = Arc::from(account.name.as_str());
        Ok(TableClient {
            inner: Arc::new(ClientInner {
                http,
                account,
                account_label,
                options,
            }),
        })
    }

    pub fn account(&self) -> &Account {
        &self.inner.account
    }

    pub fn telemetry(&self) -> &Telemetry {
        &self.inner.options.telemetry
    }

    pub fn is_read_only(&self) -> bool {
        self.inner.options.read_only
    }

    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.inner.options.retry
    }

    /// The same account and settings with a different credential key (secondary key checks).
    pub fn with_account(&self, account: Account) -> Result<TableClient> {
        TableClient::new(account, self.inner.options.clone())
    }

    // ---- tables -------------------------------------------------------------------------

    /// One page of table names; `next` is the `NextTableName` of the previous page.
    pub async fn list_tables_page(
        &self,
        filter: Option<&str>,
        top: Option<u32>,
        next: Option<&str>,
    ) -> Result<TablePage> {
        let mut req = Request::new(Method::GET, "/Tables".into(), Operation::ListTables);
        let mut q = Vec::new();
        if let Some(f) = filter.filter(|f| !f.trim().is_empty()) {
            q.push(format!("$filter={}", encode(f)));
        }
        if let Some(top) = top {
            q.push(format!("$top={}", top.clamp(1, MAX_PAGE_SIZE)));
        }
        if let Some(n) = next {
            q.push(format!("NextTableName={}", encode(n)));
        }
        req.query = q.join("&");
        let raw = self.send(req).await?.error_if_failed()?;
        let names = edm::parse_table_names(&raw.body).map_err(TableError::Protocol)?;
        Ok(TablePage {
            names,
            next_table_name: raw.header("x-ms-continuation-nexttablename"),
        })
    }

    /// Every table name, following `NextTableName`.
    pub async fn list_tables(&self) -> Result<Vec<String>> {
        let mut all = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let page = self.list_tables_page(None, None, next.as_deref()).await?;
            all.extend(page.names);
            match page.next_table_name {
                Some(n) => next = Some(n),
                None => return Ok(all),
            }
        }
    }

    pub async fn create_table(&self, name: &str) -> Result<()> {
        validate::table_name(name)?;
        let mut req = Request::new(Method::POST, "/Tables".into(), Operation::CreateTable);
        req.body = Some(serde_json::json!({ "TableName": name }).to_string());
        req.extra_headers
            .push(("Prefer", "return-no-content".into()));
        req.table = Some(Arc::from(name));
        let raw = self.send(req).await?;
        // A retried create that meets 409 found its own earlier success.
        if raw.status == 409
            && raw.attempts > 1
            && raw.header("x-ms-error-code").as_deref() == Some("TableAlreadyExists")
        {
            return Ok(());
        }
        raw.error_if_failed().map(|_| ())
    }

    pub async fn delete_table(&self, name: &str) -> Result<()> {
        validate::table_name(name)?;
        let path = format!("/Tables('{}')", encode(&name.replace('\'', "''")));
        let mut req = Request::new(Method::DELETE, path, Operation::DeleteTable);
        req.table = Some(Arc::from(name));
        let raw = self.send(req).await?;
        if raw.status == 404 && raw.attempts > 1 {
            return Ok(());
        }
        raw.error_if_failed().map(|_| ())
    }

    // ---- queries ------------------------------------------------------------------------

    /// One page of a query, starting at `from` (None = the beginning).
    pub async fn query_page(
        &self,
        table: &str,
        spec: &QuerySpec,
        from: Option<&Continuation>,
    ) -> Result<EntityPage> {
        let req = self.query_request(table, spec, from, None)?;
        let raw = self.send(req).await?;
        self.finish_query(raw)
    }

    fn query_request(
        &self,
        table: &str,
        spec: &QuerySpec,
        from: Option<&Continuation>,
        on_headers: Option<oneshot::Sender<Option<Continuation>>>,
    ) -> Result<Request> {
        validate::table_name(table)?;
        let mut query = spec.query_string()?;
        if let Some(c) = from {
            if !query.is_empty() {
                query.push('&');
            }
            query.push_str(&format!(
                "NextPartitionKey={}",
                encode(&c.next_partition_key)
            ));
            if let Some(rk) = &c.next_row_key {
                query.push_str(&format!("&NextRowKey={}", encode(rk)));
            }
        }
        let mut req = Request::new(Method::GET, format!("/{table}()"), Operation::QueryEntities);
        req.query = query;
        req.table = Some(Arc::from(table));
        req.partition = spec.partition();
        req.on_headers = on_headers;
        req.defer_final_record = true;
        Ok(req)
    }

    fn finish_query(&self, raw: RawResponse) -> Result<EntityPage> {
        let mut raw = raw;
        let record = raw.record.take();
        let parsed = if raw.is_success() {
            edm::parse_entity_page(&raw.body).map_err(TableError::Protocol)
        } else {
            Ok(Vec::new())
        };
        if let Some(mut r) = record {
            r.entity_count = parsed.as_ref().map(|e| e.len() as u32).unwrap_or(0);
            self.telemetry().emit(&r);
        }
        let continuation = Continuation::from_headers(&raw.headers);
        let raw = raw.error_if_failed()?;
        drop(raw);
        Ok(EntityPage {
            entities: parsed?,
            continuation,
        })
    }

    /// Every page of a query from `from`, prefetching: the next page's request goes out as soon
    /// as this page's continuation headers arrive, and this page is parsed while it is in
    /// flight. `limit` caps the total number of entities.
    pub fn query_stream(
        &self,
        table: &str,
        spec: QuerySpec,
        from: Option<Continuation>,
        limit: Option<u64>,
    ) -> EntityStream {
        let (tx, rx) = mpsc::channel::<Result<EntityPage>>(2);
        let client = self.clone();
        let table = table.to_string();
        let task = tokio::spawn(async move {
            client.produce_pages(table, spec, from, limit, tx).await;
        });
        EntityStream {
            rx,
            buffered: VecDeque::new(),
            remaining: limit,
            _task: AbortOnDrop(task),
        }
    }

    async fn produce_pages(
        &self,
        table: String,
        spec: QuerySpec,
        from: Option<Continuation>,
        limit: Option<u64>,
        tx: mpsc::Sender<Result<EntityPage>>,
    ) {
        let mut delivered: u64 = 0;
        let mut current = match self.spawn_fetch(&table, &spec, from.as_ref()) {
            Ok(f) => f,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        loop {
            // Resolves at header time of the first successful attempt (or when the fetch fails).
            let continuation = (&mut current.continuation).await.ok().flatten();
            let wants_more = |got: u64| limit.is_none_or(|l| got < l);
            let next = match &continuation {
                Some(c) if wants_more(delivered) => {
                    match self.spawn_fetch(&table, &spec, Some(c)) {
                        Ok(f) => Some(f),
                        Err(e) => {
                            let _ = tx.send(Err(e)).await;
                            return;
                        }
                    }
                }
                _ => None,
            };
            let page = match (&mut current.response.0).await {
                Ok(Ok(raw)) => self.finish_query(raw),
                Ok(Err(e)) => Err(e),
                Err(e) => Err(TableError::Protocol(format!("query task failed: {e}"))),
            };
            let failed = page.is_err();
            if let Ok(p) = &page {
                delivered += p.entities.len() as u64;
            }
            if tx.send(page).await.is_err() || failed {
                return;
            }
            match next {
                Some(n) if wants_more(delivered) => current = n,
                _ => return,
            }
        }
    }

    fn spawn_fetch(
        &self,
        table: &str,
        spec: &QuerySpec,
        from: Option<&Continuation>,
    ) -> Result<PendingPage> {
        let (tx, rx) = oneshot::channel();
        let req = self.query_request(table, spec, from, Some(tx))?;
        let client = self.clone();
        let handle = tokio::spawn(async move { client.send(req).await });
        Ok(PendingPage {
            continuation: rx,
            response: AbortOnDrop(handle),
        })
    }

    // ---- entities -----------------------------------------------------------------------

    /// Reads one entity; 404 is an error (see `try_get_entity`).
    pub async fn get_entity(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
    ) -> Result<Entity> {
        validate::table_name(table)?;
        // Keys with '%' are addressed through a filter: some service versions decode the path
        // twice, so a path with %25 would name another key.
        if partition_key.contains('%') || row_key.contains('%') {
            let spec = QuerySpec {
                filter: Some(filter::point_filter(partition_key, row_key)),
                page_size: Some(1),
                ..QuerySpec::default()
            };
            let mut stream = self.query_stream(table, spec, None, Some(1));
            return match stream.next().await {
                Some(r) => r,
                None => Err(TableError::Service(super::error::ServiceError {
                    status: 404,
                    code: Some("ResourceNotFound".into()),
                    message: "The specified resource does not exist.".into(),
                    request_id: None,
                })),
            };
        }
        let mut req = Request::new(
            Method::GET,
            entity_path(table, partition_key, row_key),
            Operation::GetEntity,
        );
        req.table = Some(Arc::from(table));
        req.partition = PartitionRef::Key(partition_key.to_string());
        req.entity_count = 1;
        let raw = self.send(req).await?.error_if_failed()?;
        let etag = raw.header("etag");
        let mut entity =
            Entity::from_json(&String::from_utf8_lossy(&raw.body)).map_err(TableError::Protocol)?;
        if entity.etag.is_none() {
            entity.etag = etag;
        }
        Ok(entity)
    }

    pub async fn try_get_entity(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
    ) -> Result<Option<Entity>> {
        match self.get_entity(table, partition_key, row_key).await {
            Ok(e) => Ok(Some(e)),
            Err(e) if e.is_not_found() && e.code() != Some("TableNotFound") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Inserts; fails with 409 EntityAlreadyExists if the keys are taken.
    pub async fn insert(&self, table: &str, entity: &Entity) -> Result<WriteOutcome> {
        self.check_write("insert", table, entity)?;
        let mut req = Request::new(Method::POST, format!("/{table}"), Operation::InsertEntity);
        req.body = Some(entity.to_request_json());
        req.extra_headers
            .push(("Prefer", "return-no-content".into()));
        self.entity_request(&mut req, table, entity);
        let raw = self.send(req).await?;
        if raw.status == 409 && raw.attempts > 1 {
            // The first attempt may have been applied and its answer lost: is the entity ours?
            if let Some(current) = self
                .try_get_entity(table, &entity.partition_key, &entity.row_key)
                .await?
            {
                if current.same_content(entity) {
                    return Ok(WriteOutcome {
                        etag: current.etag,
                        attempts: raw.attempts,
                        probably_done_earlier: true,
                    });
                }
            }
        }
        raw.into_write_outcome()
    }

    /// Replace or merge, conditional on `condition`.
    pub async fn update(
        &self,
        table: &str,
        entity: &Entity,
        mode: UpdateMode,
        condition: &Condition,
    ) -> Result<WriteOutcome> {
        let op = match mode {
            UpdateMode::Replace => "replace",
            UpdateMode::Merge => "merge",
        };
        self.check_write(op, table, entity)?;
        let operation = match mode {
            UpdateMode::Replace => Operation::UpdateEntity,
            UpdateMode::Merge => Operation::MergeEntity,
        };
        let mut req = self.write_request(table, entity, mode, operation);
        req.extra_headers
            .push(("If-Match", condition.header().to_string()));
        let raw = self.send(req).await?;
        if raw.status == 412 && raw.attempts > 1 {
            // Our own earlier attempt may have changed the ETag: compare with what we sent.
            if let Some(current) = self
                .try_get_entity(table, &entity.partition_key, &entity.row_key)
                .await?
            {
                let applied = match mode {
                    UpdateMode::Replace => current.same_content(entity),
                    UpdateMode::Merge => entity
                        .properties
                        .iter()
                        .all(|p| current.get(&p.name) == Some(&p.value)),
                };
                if applied {
                    return Ok(WriteOutcome {
                        etag: current.etag,
                        attempts: raw.attempts,
                        probably_done_earlier: true,
                    });
                }
            }
        }
        raw.into_write_outcome()
    }

    /// Insert-or-replace / insert-or-merge: unconditional by nature (no `If-Match`).
    pub async fn upsert(
        &self,
        table: &str,
        entity: &Entity,
        mode: UpdateMode,
    ) -> Result<WriteOutcome> {
        let (op, operation) = match mode {
            UpdateMode::Replace => ("insert-or-replace", Operation::InsertOrReplace),
            UpdateMode::Merge => ("insert-or-merge", Operation::InsertOrMerge),
        };
        self.check_write(op, table, entity)?;
        let req = self.write_request(table, entity, mode, operation);
        let raw = self.send(req).await?;
        raw.into_write_outcome()
    }

    pub async fn delete_entity(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        condition: &Condition,
    ) -> Result<WriteOutcome> {
        if self.is_read_only() {
            return Err(TableError::ReadOnly {
                operation: "delete",
            });
        }
        validate::table_name(table)?;
        validate::key("PartitionKey", partition_key)?;
        validate::key("RowKey", row_key)?;
        let mut req = Request::new(
            Method::DELETE,
            entity_path(table, partition_key, row_key),
            Operation::DeleteEntity,
        );
        req.table = Some(Arc::from(table));
        req.partition = PartitionRef::Key(partition_key.to_string());
        req.entity_count = 1;
        req.extra_headers
            .push(("If-Match", condition.header().to_string()));
        let raw = self.send(req).await?;
        if raw.status == 404
            && raw.attempts > 1
            && raw.header("x-ms-error-code").as_deref() != Some("TableNotFound")
        {
            return Ok(WriteOutcome {
                etag: None,
                attempts: raw.attempts,
                probably_done_earlier: true,
            });
        }
        let attempts = raw.attempts;
        raw.error_if_failed()?;
        Ok(WriteOutcome {
            etag: None,
            attempts,
            probably_done_earlier: false,
        })
    }

    /// Applies up to 100 writes to one partition atomically. On failure nothing was applied and
    /// the error names the failing operation's index.
    pub async fn submit_batch(&self, table: &str, ops: &[BatchOp]) -> Result<Vec<WriteOutcome>> {
        if self.is_read_only() {
            return Err(TableError::ReadOnly { operation: "batch" });
        }
        validate::table_name(table)?;
        batch::validate_ops(ops)?;
        let id = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
        let (content_type, body) = batch::build_body(
            &self.inner.account.endpoint,
            table,
            ops,
            &id,
            self.inner.account.cosmos,
        );
        if body.len() >= batch::MAX_BATCH_BYTES {
            return Err(validate_err(
                "batch",
                format!("body is {} bytes; the limit is 4 MiB", body.len()),
            ));
        }
        let mut req = Request::new(Method::POST, "/$batch".into(), Operation::Batch);
        req.body = Some(body);
        req.content_type = Some(content_type);
        req.table = Some(Arc::from(table));
        req.partition = PartitionRef::Key(ops[0].keys().0.to_string());
        req.entity_count = ops.len() as u32;
        let raw = self.send(req).await?;
        let attempts = raw.attempts;
        let raw = raw.error_if_failed()?;
        let subs = batch::parse_response(&String::from_utf8_lossy(&raw.body));
        if let Some(failed) = subs.iter().find(|s| s.status >= 400) {
            return Err(TableError::Service(batch::failure(failed).1));
        }
        if subs.len() != ops.len() {
            return Err(TableError::Protocol(format!(
                "batch of {} operations got {} answers",
                ops.len(),
                subs.len()
            )));
        }
        Ok(subs
            .into_iter()
            .map(|s| WriteOutcome {
                etag: s.etag,
                attempts,
                probably_done_earlier: false,
            })
            .collect())
    }

    /// A cheap authenticated request: lists at most one table.
    pub async fn probe(&self) -> Result<()> {
        self.list_tables_page(None, Some(1), None).await.map(|_| ())
    }

    fn check_write(&self, operation: &'static str, table: &str, entity: &Entity) -> Result<()> {
        if self.is_read_only() {
            return Err(TableError::ReadOnly { operation });
        }
        validate::table_name(table)?;
        validate::entity(entity)?;
        Ok(())
    }

    fn write_request(
        &self,
        table: &str,
        entity: &Entity,
        mode: UpdateMode,
        operation: Operation,
    ) -> Request {
        let path = entity_path(table, &entity.partition_key, &entity.row_key);
        let mut req = match mode {
            UpdateMode::Replace => Request::new(Method::PUT, path, operation),
            UpdateMode::Merge if self.inner.account.cosmos => {
                let mut r = Request::new(Method::POST, path, operation);
                r.extra_headers.push(("X-HTTP-Method", "MERGE".into()));
                r
            }
            UpdateMode::Merge => Request::new(Method::PATCH, path, operation),
        };
        req.body = Some(entity.to_request_json());
        self.entity_request(&mut req, table, entity);
        req
    }

    fn entity_request(&self, req: &mut Request, table: &str, entity: &Entity) {
        req.table = Some(Arc::from(table));
        req.partition = PartitionRef::Key(entity.partition_key.clone());
        req.entity_count = 1;
    }

    // ---- the wire -----------------------------------------------------------------------

    /// Sends with retries. Returns the final response whatever its status; `Err` only when no
    /// response arrived on the last attempt (transport error or timeout) or the request could
    /// not be built.
    async fn send(&self, mut req: Request) -> Result<RawResponse> {
        if req.operation.is_write() && self.is_read_only() {
            // The one choke point every write passes: nothing leaves a read-only client.
            return Err(TableError::ReadOnly {
                operation: req.operation.name(),
            });
        }
        let account = &self.inner.account;
        let policy = &self.inner.options.retry;
        let max_attempts = policy.max_attempts.max(1);
        let mut url = format!("{}{}", account.endpoint, req.path);
        let mut query = req.query.clone();
        if let Credential::Sas(sas) = &account.credential {
            if !query.is_empty() {
                query.push('&');
            }
            query.push_str(sas.query());
        }
        if !query.is_empty() {
            url.push('?');
            url.push_str(&query);
        }
        let url = reqwest::Url::parse(&url)
            .map_err(|e| TableError::Protocol(format!("cannot build the request URL: {e}")))?;
        let body_len = req.body.as_ref().map_or(0, |b| b.len()) as u64;
        let body = req.body.take().map(Bytes::from);
        let content_type = match (&body, &req.content_type) {
            (None, _) => "",
            (Some(_), Some(ct)) => ct.as_str(),
            (Some(_), None) => JSON,
        };
        let resource = auth::canonicalized_resource(&account.name, url.path(), url.query());

        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut headers = HeaderMap::new();
            let date = edm::rfc1123(edm::DateTime::now().unix_seconds());
            let put = |h: &mut HeaderMap, k: &'static str, v: &str| {
                if let Ok(v) = HeaderValue::from_str(v) {
                    h.insert(k, v);
                }
            };
            put(&mut headers, "x-ms-version", API_VERSION);
            put(&mut headers, "Accept", ACCEPT);
            put(&mut headers, "DataServiceVersion", "3.0;NetFx");
            put(&mut headers, "MaxDataServiceVersion", "3.0;NetFx");
            if body.is_some() {
                put(&mut headers, "Content-Type", content_type);
            }
            for (k, v) in &req.extra_headers {
                put(&mut headers, k, v);
            }
            if let Credential::SharedKey { key, scheme } = &account.credential {
                put(&mut headers, "x-ms-date", &date);
                let authz = auth::authorization(
                    *scheme,
                    &account.name,
                    key,
                    req.method.as_str(),
                    content_type,
                    &date,
                    &resource,
                );
                put(&mut headers, "Authorization", &authz);
            }
            let mut builder = self
                .inner
                .http
                .request(req.method.clone(), url.clone())
                .headers(headers);
            if let Some(b) = &body {
                builder = builder.body(b.clone());
            }
            let started = Instant::now();
            let time = SystemTime::now();
            let on_headers = &mut req.on_headers;
            let exchange = async {
                let resp = builder.send().await?;
                let status = resp.status().as_u16();
                let headers = resp.headers().clone();
                if (200..300).contains(&status) {
                    if let Some(tx) = on_headers.take() {
                        let _ = tx.send(Continuation::from_headers(&headers));
                    }
                }
                let body = resp.bytes().await?;
                Ok::<_, reqwest::Error>((status, headers, body))
            };
            let outcome = tokio::time::timeout(policy.attempt_timeout, exchange).await;
            let latency = started.elapsed();
            let record = |status: Option<u16>,
                          code: Option<String>,
                          received: u64,
                          timed_out: bool| AttemptRecord {
                time,
                account: self.inner.account_label.clone(),
                table: req.table.clone(),
                operation: req.operation,
                partition: req.partition.clone(),
                entity_count: req.entity_count,
                status,
                error_code: code,
                attempt,
                latency,
                bytes_sent: body_len,
                bytes_received: received,
                timed_out,
            };
            let telemetry = self.telemetry();
            match outcome {
                Ok(Ok((status, headers, resp_body))) => {
                    let code = headers
                        .get("x-ms-error-code")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    let retry = is_retryable_status(status) && attempt < max_attempts;
                    let rec = telemetry
                        .is_active()
                        .then(|| record(Some(status), code, resp_body.len() as u64, false));
                    let deferred = if retry || !req.defer_final_record {
                        if let Some(r) = &rec {
                            telemetry.emit(r);
                        }
                        None
                    } else {
                        rec
                    };
                    if retry {
                        tokio::time::sleep(
                            retry_after(&headers, policy).unwrap_or_else(|| policy.delay(attempt)),
                        )
                        .await;
                        continue;
                    }
                    return Ok(RawResponse {
                        status,
                        headers,
                        body: resp_body,
                        attempts: attempt,
                        record: deferred,
                    });
                }
                Ok(Err(e)) => {
                    if telemetry.is_active() {
                        telemetry.emit(&record(None, None, 0, e.is_timeout()));
                    }
                    if attempt < max_attempts {
                        tokio::time::sleep(policy.delay(attempt)).await;
                        continue;
                    }
                    return Err(TableError::Transport {
                        message: format!(
                            "no answer from {} after {attempt} attempt(s): {}",
                            account.endpoint,
                            describe_reqwest_error(&e)
                        ),
                        timed_out: e.is_timeout(),
                    });
                }
                Err(_) => {
                    if telemetry.is_active() {
                        telemetry.emit(&record(None, None, 0, true));
                    }
                    if attempt < max_attempts {
                        tokio::time::sleep(policy.delay(attempt)).await;
                        continue;
                    }
                    return Err(TableError::Transport {
                        message: format!(
                            "{} did not answer within {:?} ({attempt} attempt(s))",
                            account.endpoint, policy.attempt_timeout
                        ),
                        timed_out: true,
                    });
                }
            }
        }
    }
}

/// A server-requested wait (`x-ms-retry-after-ms` from Cosmos, `Retry-After` seconds), capped by
/// the policy's maximum delay.
fn retry_after(headers: &HeaderMap, policy: &RetryPolicy) -> Option<Duration> {
    let get = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let wait = get("x-ms-retry-after-ms")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_millis)
        .or_else(|| {
            get("retry-after")
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs)
        })?;
    Some(wait.min(policy.max_delay))
}

/// The error chain in words, without the URL (it may carry a SAS signature).
fn describe_reqwest_error(e: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut parts = Vec::new();
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    let head = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "could not connect".to_string()
    } else {
        "the connection failed".to_string()
    };
    let detail = parts.last().cloned().unwrap_or_default();
    super::connection::redact_sas(&if detail.is_empty() {
        head
    } else {
        format!("{head} ({detail})")
    })
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct PendingPage {
    continuation: oneshot::Receiver<Option<Continuation>>,
    response: AbortOnDrop<Result<RawResponse>>,
}

/// Pages (or entities) of a query as they arrive; dropping it cancels the query.
pub struct EntityStream {
    rx: mpsc::Receiver<Result<EntityPage>>,
    buffered: VecDeque<Entity>,
    remaining: Option<u64>,
    _task: AbortOnDrop<()>,
}

impl EntityStream {
    /// The next page, truncated to the limit. Pages may be empty (the service ended a page at a
    /// partition boundary) while a continuation remains.
    pub async fn next_page(&mut self) -> Option<Result<EntityPage>> {
        if self.remaining == Some(0) {
            return None;
        }
        let mut page = self.rx.recv().await?;
        if let (Ok(p), Some(rem)) = (&mut page, &mut self.remaining) {
            if p.entities.len() as u64 >= *rem {
                p.entities.truncate(*rem as usize);
                *rem = 0;
            } else {
                *rem -= p.entities.len() as u64;
            }
        }
        Some(page)
    }

    /// The next entity.
    pub async fn next(&mut self) -> Option<Result<Entity>> {
        loop {
            if let Some(e) = self.buffered.pop_front() {
                return Some(Ok(e));
            }
            match self.next_page().await? {
                Ok(p) => self.buffered.extend(p.entities),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_paths_double_quotes_and_percent_encode() {
        assert_eq!(
            entity_path("t1", "p'1 x", "r1 é"),
            "/t1(PartitionKey='p%27%271%20x',RowKey='r1%20%C3%A9')"
        );
        assert_eq!(
            entity_path("t", "100%", "a-b.c_d~e"),
            "/t(PartitionKey='100%25',RowKey='a-b.c_d~e')"
        );
    }

    #[test]
    fn query_string_encodes_values_and_keeps_dollar_names() {
        let spec = QuerySpec {
            filter: Some("PartitionKey eq 'a b'".into()),
            select: Some(vec!["Amount".into(), "RowKey".into()]),
            page_size: Some(10),
        };
        assert_eq!(
            spec.query_string().unwrap(),
            "$filter=PartitionKey%20eq%20%27a%20b%27&$select=PartitionKey%2CRowKey%2CAmount&$top=10"
        );
        let bad = QuerySpec {
            page_size: Some(1001),
            ..QuerySpec::default()
        };
        assert!(bad
            .query_string()
            .unwrap_err()
            .to_string()
            .contains("1 to 1000"));
        let bad = QuerySpec {
            select: Some(vec!["bad-name".into()]),
            ..QuerySpec::default()
        };
        assert!(bad.query_string().is_err());
    }

    #[test]
    fn queries_are_attributed_to_their_partition() {
        assert_eq!(
            QuerySpec::with_filter("PartitionKey eq 'EU' and RowKey ge '2024'").partition(),
            PartitionRef::Key("EU".into())
        );
        assert_eq!(
            QuerySpec::with_filter("Amount gt 5").partition(),
            PartitionRef::Scan
        );
        assert_eq!(QuerySpec::default().partition(), PartitionRef::Scan);
    }

    #[test]
    fn server_requested_waits_are_capped() {
        let mut h = HeaderMap::new();
        h.insert("x-ms-retry-after-ms", HeaderValue::from_static("250"));
        let p = RetryPolicy::default();
        assert_eq!(retry_after(&h, &p), Some(Duration::from_millis(250)));
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("3600"));
        assert_eq!(retry_after(&h, &p), Some(p.max_delay));
    }
}
