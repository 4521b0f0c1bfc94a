//! The metrics hub: consumes the client's per-attempt records and keeps what the live partition
//! dashboard draws: one-second buckets (default 300 s) per account and per tracked partition
//! (requests, served entities, successes, 503 ServerBusy, 500 OperationTimedOut, client
//! timeouts, other errors, retries, latency), a Space-Saving heavy-hitter sketch that bounds the
//! tracked partitions (default 1,000; the rest count as "other"), per-table insert-order and
//! scan counters, and the warnings drawn from the seeds. Snapshots are plain values, exported
//! as JSON or CSV. No UI here.
//!
//! Counting rules: every attempt is a request; `entities` counts the entities of successful
//! attempts (the throughput the targets speak of); an attempt with `attempt > 1` is a retry.
//! Time is the record's own `time` (unix seconds), so a replay or a test controls it.

mod hist;
mod snapshot;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::azure::telemetry::{AttemptRecord, Operation, PartitionRef, Telemetry};
use crate::config::Targets;

use hist::{CoarseHist, FineHist};
pub use snapshot::{
    AccountSnapshot, PartitionSnapshot, ScanSummary, SecondStats, Snapshot, TableScans, Totals,
    Warning, WarningKind,
};

/// Seconds per per-partition latency chunk: 300 one-second histograms per partition would
/// cost ~90 KB each, 30 ten-second ones cost ~9 KB.
const LATENCY_CHUNK_SECS: u32 = 10;
/// Account name that absorbs accounts past `max_accounts`.
const OTHER_ACCOUNTS: &str = "(other accounts)";
/// Table name that absorbs tables past `max_tables` (scans only; no key-order tracking).
const OTHER_TABLES: &str = "(other tables)";

/// FxHash (as in rustc): a multiply-rotate per word, several times cheaper than SipHash on
/// short keys. Flooding is no risk: each map holds at most `capacity` keys, so a crafted
/// collision costs at most that many comparisons.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0xf135_7aea_2e62_a9c5;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.0 = (self.0.rotate_left(26) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.0 = (self.0.rotate_left(26) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(26) ^ u64::from(i)).wrapping_mul(0xf135_7aea_2e62_a9c5);
    }

    fn finish(&self) -> u64 {
        // The high bits are the well-mixed ones; hashbrown takes its tag from the top 7.
        self.0.rotate_left(26)
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// What orders the top partitions (and weighs the sketch that decides which are tracked).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RankBy {
    #[default]
    Entities,
    Throttled,
}

/// Thresholds of the warnings; defaults as documented on each field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarningRules {
    /// Append/prepend-only: at least this many first-attempt inserts in the table in the window.
    pub order_min_inserts: u32,
    /// … with at least this many key changes in the dominant direction (≈ distinct keys).
    pub order_min_changes: u32,
    /// … making at least this share of all key changes.
    pub order_min_share: f64,
    /// Table scans: at least this many scan queries in the window.
    pub scan_min_queries: u32,
    /// Retry storm: a second counts as stormy with at least this many retries …
    pub retry_min_per_s: u32,
    /// … making more than this share of that second's attempts;
    pub retry_min_share: f64,
    /// the warning fires with at least this many stormy seconds in the window.
    pub retry_min_seconds: u32,
}

impl Default for WarningRules {
    fn default() -> Self {
        WarningRules {
            order_min_inserts: 50,
            order_min_changes: 20,
            order_min_share: 0.9,
            scan_min_queries: 1,
            retry_min_per_s: 10,
            retry_min_share: 0.2,
            retry_min_seconds: 3,
        }
    }
}

/// Sizes and rules of a hub.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HubConfig {
    /// How far back buckets go (whole seconds, at least 1). Default 300 s.
    pub retention: Duration,
    /// Partitions tracked exactly by the heavy-hitter sketch. Default 1,000.
    pub capacity: usize,
    /// Partitions listed in a snapshot. Default 20.
    pub top_n: usize,
    /// Partition keys longer than this are truncated (at a char boundary) for tracking.
    pub max_key_bytes: usize,
    /// Accounts kept apart; further ones share one entry. Default 8.
    pub max_accounts: usize,
    /// Tables per account with scan and key-order counters. Default 128.
    pub max_tables: usize,
    pub rank_by: RankBy,
    pub rules: WarningRules,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            retention: Duration::from_secs(300),
            capacity: 1000,
            top_n: 20,
            max_key_bytes: 256,
            max_accounts: 8,
            max_tables: 128,
            rank_by: RankBy::Entities,
            rules: WarningRules::default(),
        }
    }
}

/// Per-second counters of one account or partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub requests: u32,
    pub entities: u32,
    pub successes: u32,
    pub server_busy: u32,
    pub server_timeouts: u32,
    pub client_timeouts: u32,
    pub other_errors: u32,
    pub retries: u32,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.requests = self.requests.saturating_add(o.requests);
        self.entities = self.entities.saturating_add(o.entities);
        self.successes = self.successes.saturating_add(o.successes);
        self.server_busy = self.server_busy.saturating_add(o.server_busy);
        self.server_timeouts = self.server_timeouts.saturating_add(o.server_timeouts);
        self.client_timeouts = self.client_timeouts.saturating_add(o.client_timeouts);
        self.other_errors = self.other_errors.saturating_add(o.other_errors);
        self.retries = self.retries.saturating_add(o.retries);
    }

    /// One attempt's contribution: 2xx success, 503 ServerBusy, 500 OperationTimedOut, no
    /// response + timed out = client timeout, anything else (transport error, other status) =
    /// other error.
    fn classify(r: &AttemptRecord) -> Counts {
        let mut c = Counts {
            requests: 1,
            retries: u32::from(r.attempt > 1),
            ..Counts::default()
        };
        match r.status {
            Some(s) if (200..300).contains(&s) => {
                c.successes = 1;
                c.entities = r.entity_count;
            }
            Some(503) => c.server_busy = 1,
            Some(500) if r.error_code.as_deref() == Some("OperationTimedOut") => {
                c.server_timeouts = 1
            }
            None if r.timed_out => c.client_timeouts = 1,
            _ => c.other_errors = 1,
        }
        c
    }

    fn throttled(&self) -> u32 {
        self.server_busy.saturating_add(self.server_timeouts)
    }
}

/// A ring element that can be emptied in place (keeps its allocation).
trait Cell: Default {
    fn reset(&mut self);
}

impl Cell for Counts {
    fn reset(&mut self) {
        *self = Counts::default();
    }
}

impl Cell for CoarseHist {
    fn reset(&mut self) {
        self.counts.fill(0);
    }
}

#[derive(Default)]
struct AccountSecond {
    counts: Counts,
    /// Allocated on the first latency of the slot, then reused.
    latency: Option<FineHist>,
}

impl Cell for AccountSecond {
    fn reset(&mut self) {
        self.counts = Counts::default();
        if let Some(h) = &mut self.latency {
            h.clear();
        }
    }
}

#[derive(Clone, Copy, Default)]
struct TableSecond {
    inserts: u32,
    increases: u32,
    decreases: u32,
    scans: u32,
    scan_entities: u32,
}

impl Cell for TableSecond {
    fn reset(&mut self) {
        *self = TableSecond::default();
    }
}

/// Marks a ring slot that never held data.
const EMPTY: u32 = u32::MAX;

/// A ring of time units (`gran` seconds each), indexed by unix second; a slot whose stamp is
/// not the unit asked for holds older data and is reset before reuse.
struct Ring<T> {
    slots: Box<[(u32, T)]>,
    gran: u32,
}

impl<T: Cell> Ring<T> {
    fn new(len: usize, gran: u32) -> Self {
        Ring {
            slots: (0..len.max(1)).map(|_| (EMPTY, T::default())).collect(),
            gran: gran.max(1),
        }
    }

    fn at(&mut self, sec: u32) -> &mut T {
        let unit = sec / self.gran;
        let len = self.slots.len();
        let slot = &mut self.slots[unit as usize % len];
        if slot.0 != unit {
            slot.0 = unit;
            slot.1.reset();
        }
        &mut slot.1
    }

    fn get(&self, sec: u32) -> Option<&T> {
        let unit = sec / self.gran;
        let slot = &self.slots[unit as usize % self.slots.len()];
        (slot.0 == unit).then_some(&slot.1)
    }

    /// Forgets the units covering seconds `from..=to` (a reused partition slot).
    fn forget(&mut self, from: u32, to: u32) {
        let len = self.slots.len() as u32;
        let (a, b) = (from / self.gran, to / self.gran);
        for unit in a..=b.min(a.saturating_add(len - 1)) {
            let slot = &mut self.slots[unit as usize % len as usize];
            if slot.0 == unit {
                slot.0 = EMPTY;
                slot.1.reset();
            }
        }
    }
}

struct TableStats {
    name: Arc<str>,
    /// Key order is tracked only for real tables (not the overflow entry).
    track_order: bool,
    last_key: Option<String>,
    ring: Ring<TableSecond>,
}

struct Account {
    name: Arc<str>,
    ring: Ring<AccountSecond>,
    tables: FastMap<Arc<str>, TableStats>,
    /// table → partition key → slot index; holds exactly the tracked partitions.
    partitions: FastMap<Arc<str>, FastMap<Box<str>, u32>>,
}

/// One tracked partition of the sketch.
struct Slot {
    account: u32,
    table: Arc<str>,
    key: Box<str>,
    key_truncated: bool,
    /// First second counted for this partition; older buckets belong to an evicted one.
    since: u32,
    /// Space-Saving count (decayed by half each minute of record time) …
    count: u64,
    /// … and how much of it was inherited from the partition it replaced.
    error: u64,
    heap_pos: u32,
    ring: Ring<Counts>,
    latency: Ring<CoarseHist>,
}

struct State {
    config: HubConfig,
    retention: u32,
    /// Latest record second seen; 0 before the first.
    head: u32,
    accounts: Vec<Account>,
    account_index: FastMap<Arc<str>, u32>,
    slots: Vec<Slot>,
    /// Min-heap of slot indices by `count`: the root is the eviction victim.
    heap: Vec<u32>,
    dropped: u64,
}

/// The metrics hub; share it as `Arc<Hub>`.
pub struct Hub {
    targets: Targets,
    clock: Box<dyn Fn() -> SystemTime + Send + Sync>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hub(targets: {:?})", self.targets)
    }
}

fn unix_secs(t: SystemTime) -> Option<u32> {
    let secs = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
    u32::try_from(secs).ok().filter(|&s| s != EMPTY && s > 0)
}

/// The longest prefix of `key` of at most `max` bytes that ends on a char boundary.
fn truncate_key(key: &str, max: usize) -> &str {
    if key.len() <= max {
        return key;
    }
    let mut end = max;
    while !key.is_char_boundary(end) {
        end -= 1;
    }
    &key[..end]
}

impl Hub {
    /// A hub with the default sizes; `clock` tells the present (`SystemTime::now` in the app).
    pub fn new(targets: Targets, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Hub {
        Hub::with_config(targets, HubConfig::default(), clock)
    }

    pub fn with_config(
        targets: Targets,
        config: HubConfig,
        clock: impl Fn() -> SystemTime + Send + Sync + 'static,
    ) -> Hub {
        let retention = u32::try_from(config.retention.as_secs())
            .unwrap_or(u32::MAX / 2)
            .clamp(1, 86_400);
        let config = HubConfig {
            retention: Duration::from_secs(u64::from(retention)),
            capacity: config.capacity.clamp(1, u32::MAX as usize / 2),
            max_accounts: config.max_accounts.max(1),
            max_tables: config.max_tables.max(1),
            max_key_bytes: config.max_key_bytes.max(4),
            ..config
        };
        Hub {
            targets,
            clock: Box::new(clock),
            state: Mutex::new(State {
                config,
                retention,
                head: 0,
                accounts: Vec::new(),
                account_index: FastMap::default(),
                slots: Vec::new(),
                heap: Vec::new(),
                dropped: 0,
            }),
        }
    }

    pub fn targets(&self) -> Targets {
        self.targets
    }

    pub fn config(&self) -> HubConfig {
        self.lock().config
    }

    /// Subscribes to `telemetry`: every attempt record is recorded on the thread that made it.
    pub fn attach(self: &Arc<Self>, telemetry: &Telemetry) {
        let hub = Arc::clone(self);
        telemetry.subscribe_fn(move |r| hub.record(r));
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves counters, never broken invariants
        // worth losing the dashboard over.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one attempt. Records older than the retention (behind the newest one seen) or
    /// more than the retention ahead of the clock are dropped and counted.
    pub fn record(&self, r: &AttemptRecord) {
        let Some(sec) = unix_secs(r.time) else {
            self.lock().dropped += 1;
            return;
        };
        let delta = Counts::classify(r);
        let mut st = self.lock();
        if sec > st.head {
            // Only a record that moves the head reads the clock: about once a second.
            let now = unix_secs((self.clock)()).unwrap_or(0);
            if now != 0 && sec > now.saturating_add(st.retention) {
                st.dropped += 1;
                return;
            }
            st.advance(sec);
        } else if sec.saturating_add(st.retention) <= st.head {
            st.dropped += 1;
            return;
        }
        st.record_at(sec, r, &delta);
    }

    /// Everything the dashboard draws over the `window` (whole seconds, at most the retention)
    /// ending with the second of `now`, inclusive.
    pub fn snapshot(&self, window: Duration, now: SystemTime) -> Snapshot {
        let rank_by = self.lock().config.rank_by;
        self.snapshot_by(window, now, rank_by)
    }

    /// As `snapshot`, ranking the top partitions by `rank_by`.
    pub fn snapshot_by(&self, window: Duration, now: SystemTime, rank_by: RankBy) -> Snapshot {
        let now = unix_secs(now).unwrap_or(0);
        let st = self.lock();
        let window = u32::try_from(window.as_secs())
            .unwrap_or(u32::MAX)
            .clamp(1, st.retention);
        snapshot::build(&st, self.targets, window, now, rank_by)
    }

    /// `snapshot` at the clock's present.
    pub fn snapshot_now(&self, window: Duration) -> Snapshot {
        self.snapshot(window, (self.clock)())
    }
}

impl State {
    /// Moves the head to `sec`, halving sketch counts once per minute crossed so partitions
    /// that went quiet give way to new heavy ones.
    fn advance(&mut self, sec: u32) {
        if self.head != 0 {
            let minutes = sec / 60 - self.head / 60;
            if minutes > 0 {
                let shift = minutes.min(63);
                // x >> k is monotone, so the heap order survives without a rebuild.
                for slot in &mut self.slots {
                    slot.count >>= shift;
                    slot.error >>= shift;
                }
            }
        }
        self.head = sec;
    }

    fn account(&mut self, name: &Arc<str>) -> usize {
        if let Some(&i) = self.account_index.get(name.as_ref()) {
            return i as usize;
        }
        let name: Arc<str> = if self.accounts.len() + 1 >= self.config.max_accounts {
            if let Some(&i) = self.account_index.get(OTHER_ACCOUNTS) {
                return i as usize;
            }
            Arc::from(OTHER_ACCOUNTS)
        } else {
            Arc::clone(name)
        };
        let i = self.accounts.len();
        self.accounts.push(Account {
            name: Arc::clone(&name),
            ring: Ring::new(self.retention as usize, 1),
            tables: FastMap::default(),
            partitions: FastMap::default(),
        });
        self.account_index.insert(name, i as u32);
        i
    }

    fn record_at(&mut self, sec: u32, r: &AttemptRecord, delta: &Counts) {
        let ai = self.account(&r.account);
        let retention = self.retention as usize;
        let max_tables = self.config.max_tables;
        let acc = &mut self.accounts[ai];
        let bucket = acc.ring.at(sec);
        bucket.counts.add(delta);
        bucket
            .latency
            .get_or_insert_with(FineHist::default)
            .record(r.latency);

        let Some(table) = &r.table else { return };
        let is_scan = r.operation == Operation::QueryEntities && r.partition == PartitionRef::Scan;
        let is_insert = r.attempt == 1
            && matches!(
                r.operation,
                Operation::InsertEntity
                    | Operation::InsertOrReplace
                    | Operation::InsertOrMerge
                    | Operation::Batch
            );
        if is_scan || is_insert {
            let stats = match acc.tables.get_mut(table.as_ref()) {
                Some(s) => s,
                None => {
                    let overflow = acc.tables.len() + 1 >= max_tables;
                    let name: Arc<str> = if overflow {
                        Arc::from(OTHER_TABLES)
                    } else {
                        Arc::clone(table)
                    };
                    acc.tables
                        .entry(Arc::clone(&name))
                        .or_insert_with(|| TableStats {
                            name,
                            track_order: !overflow,
                            last_key: None,
                            ring: Ring::new(retention, 1),
                        })
                }
            };
            let t = stats.ring.at(sec);
            if is_scan {
                t.scans = t.scans.saturating_add(1);
                t.scan_entities = t.scan_entities.saturating_add(delta.entities);
            }
            if let (true, true, PartitionRef::Key(pk)) =
                (is_insert, stats.track_order, &r.partition)
            {
                t.inserts = t.inserts.saturating_add(1);
                let pk = truncate_key(pk, self.config.max_key_bytes);
                match &mut stats.last_key {
                    Some(last) => {
                        match pk.cmp(last.as_str()) {
                            std::cmp::Ordering::Greater => {
                                t.increases = t.increases.saturating_add(1)
                            }
                            std::cmp::Ordering::Less => t.decreases = t.decreases.saturating_add(1),
                            std::cmp::Ordering::Equal => {}
                        }
                        // Reuses the buffer: no allocation once it is long enough.
                        last.clear();
                        last.push_str(pk);
                    }
                    None => stats.last_key = Some(pk.to_string()),
                }
            }
        }

        if let PartitionRef::Key(pk) = &r.partition {
            self.partition(ai, table, pk, sec, delta, r.latency);
        }
    }

    fn weight(&self, delta: &Counts) -> u64 {
        match self.config.rank_by {
            RankBy::Entities => u64::from(delta.entities.max(1)),
            // A throttled attempt outweighs any plausible run of plain ones between two.
            RankBy::Throttled => 1 + 1000 * u64::from(delta.throttled()),
        }
    }

    fn partition(
        &mut self,
        ai: usize,
        table: &Arc<str>,
        pk: &str,
        sec: u32,
        delta: &Counts,
        latency: Duration,
    ) {
        let key = truncate_key(pk, self.config.max_key_bytes);
        let w = self.weight(delta);
        let found = self.accounts[ai]
            .partitions
            .get(table.as_ref())
            .and_then(|m| m.get(key))
            .copied();
        let idx = match found {
            Some(i) => {
                let slot = &mut self.slots[i as usize];
                slot.count = slot.count.saturating_add(w);
                let pos = slot.heap_pos as usize;
                self.sift_down(pos);
                i as usize
            }
            None => self.admit(ai, table, key, key.len() < pk.len(), sec, w),
        };
        let slot = &mut self.slots[idx];
        if sec >= slot.since {
            slot.ring.at(sec).add(delta);
            slot.latency.at(sec).record(latency);
        }
    }

    /// Space-Saving admission: a free slot while there is one, else the slot with the lowest
    /// count, whose count (the new partition's possible overestimate) is inherited.
    fn admit(
        &mut self,
        ai: usize,
        table: &Arc<str>,
        key: &str,
        truncated: bool,
        sec: u32,
        w: u64,
    ) -> usize {
        let idx = if self.slots.len() < self.config.capacity {
            let idx = self.slots.len();
            self.slots.push(Slot {
                account: ai as u32,
                table: Arc::clone(table),
                key: key.into(),
                key_truncated: truncated,
                since: sec,
                count: w,
                error: 0,
                heap_pos: idx as u32,
                ring: Ring::new(self.retention as usize, 1),
                latency: Ring::new(
                    (self.retention.div_ceil(LATENCY_CHUNK_SECS) + 1) as usize,
                    LATENCY_CHUNK_SECS,
                ),
            });
            self.heap.push(idx as u32);
            self.sift_up(idx);
            idx
        } else {
            let idx = self.heap[0] as usize;
            let head = self.head;
            let slot = &mut self.slots[idx];
            let old = &mut self.accounts[slot.account as usize];
            if let Some(m) = old.partitions.get_mut(slot.table.as_ref()) {
                m.remove(slot.key.as_ref());
                if m.is_empty() {
                    old.partitions.remove(slot.table.as_ref());
                }
            }
            // Buckets from `sec` to the head may still hold the evicted partition's counts.
            slot.ring.forget(sec, head);
            slot.latency.forget(sec, head);
            slot.account = ai as u32;
            if !Arc::ptr_eq(&slot.table, table) {
                slot.table = Arc::clone(table);
            }
            slot.key = key.into();
            slot.key_truncated = truncated;
            slot.since = sec;
            slot.error = slot.count;
            slot.count = slot.count.saturating_add(w);
            self.sift_down(0);
            idx
        };
        self.accounts[ai]
            .partitions
            .entry(Arc::clone(table))
            .or_default()
            .insert(key.into(), idx as u32);
        idx
    }

    fn heap_swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        let (sa, sb) = (self.heap[a] as usize, self.heap[b] as usize);
        self.slots[sa].heap_pos = a as u32;
        self.slots[sb].heap_pos = b as u32;
    }

    fn count_at(&self, pos: usize) -> u64 {
        self.slots[self.heap[pos] as usize].count
    }

    fn sift_down(&mut self, mut pos: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * pos + 1, 2 * pos + 2);
            let mut least = pos;
            if l < n && self.count_at(l) < self.count_at(least) {
                least = l;
            }
            if r < n && self.count_at(r) < self.count_at(least) {
                least = r;
            }
            if least == pos {
                return;
            }
            self.heap_swap(pos, least);
            pos = least;
        }
    }

    fn sift_up(&mut self, mut pos: usize) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if self.count_at(pos) >= self.count_at(parent) {
                return;
            }
            self.heap_swap(pos, parent);
            pos = parent;
        }
    }
}

#[cfg(test)]
mod tests;
