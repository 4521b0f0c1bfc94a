//! Snapshots of the hub over a window: the values the dashboard draws, the warnings with their
//! one-line reasons from the seeds, and their JSON and CSV exports.

use serde::Serialize;

use super::hist::{CoarseHist, FineHist, COARSE_LEN, FINE_LEN};
use super::{Counts, RankBy, State, TableSecond, LATENCY_CHUNK_SECS};
use crate::config::Targets;

/// Sums of the per-second counters over a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub requests: u64,
    /// Entities of successful attempts.
    pub entities: u64,
    pub successes: u64,
    /// 503 ServerBusy.
    pub server_busy: u64,
    /// 500 OperationTimedOut.
    pub server_timeouts: u64,
    /// No response within the client's attempt timeout.
    pub client_timeouts: u64,
    pub other_errors: u64,
    /// Attempts after the first.
    pub retries: u64,
}

impl Totals {
    fn add(&mut self, c: &Counts) {
        self.requests += u64::from(c.requests);
        self.entities += u64::from(c.entities);
        self.successes += u64::from(c.successes);
        self.server_busy += u64::from(c.server_busy);
        self.server_timeouts += u64::from(c.server_timeouts);
        self.client_timeouts += u64::from(c.client_timeouts);
        self.other_errors += u64::from(c.other_errors);
        self.retries += u64::from(c.retries);
    }

    pub(super) fn add_totals(&mut self, o: &Totals) {
        self.requests += o.requests;
        self.entities += o.entities;
        self.successes += o.successes;
        self.server_busy += o.server_busy;
        self.server_timeouts += o.server_timeouts;
        self.client_timeouts += o.client_timeouts;
        self.other_errors += o.other_errors;
        self.retries += o.retries;
    }

    fn minus(&self, o: &Totals) -> Totals {
        Totals {
            requests: self.requests.saturating_sub(o.requests),
            entities: self.entities.saturating_sub(o.entities),
            successes: self.successes.saturating_sub(o.successes),
            server_busy: self.server_busy.saturating_sub(o.server_busy),
            server_timeouts: self.server_timeouts.saturating_sub(o.server_timeouts),
            client_timeouts: self.client_timeouts.saturating_sub(o.client_timeouts),
            other_errors: self.other_errors.saturating_sub(o.other_errors),
            retries: self.retries.saturating_sub(o.retries),
        }
    }

    /// 503 ServerBusy plus 500 OperationTimedOut: the service's two throttling answers.
    pub fn throttled(&self) -> u64 {
        self.server_busy + self.server_timeouts
    }

    /// Throttled attempts as a percentage of all attempts (0 when there were none).
    pub fn throttled_pct(&self) -> f64 {
        pct(self.throttled(), self.requests)
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// One second of an account's traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SecondStats {
    pub unix_secs: u64,
    #[serde(flatten)]
    pub totals: Totals,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AccountSnapshot {
    pub account: String,
    pub totals: Totals,
    pub entities_per_s: f64,
    pub requests_per_s: f64,
    pub retries_per_s: f64,
    pub throttled_pct: f64,
    /// Entities/s as a percentage of the account target.
    pub pct_of_target: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// One entry per second of the window, oldest first (zeros where nothing happened).
    pub series: Vec<SecondStats>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartitionSnapshot {
    pub account: String,
    pub table: String,
    pub partition_key: String,
    /// The key was longer than the tracking limit and is shown truncated.
    pub key_truncated: bool,
    /// Tracked for the whole window, so the totals are exact; otherwise they count from
    /// when the sketch admitted the partition (earlier traffic is in "other").
    pub exact: bool,
    pub totals: Totals,
    pub entities_per_s: f64,
    pub requests_per_s: f64,
    pub throttled_pct: f64,
    /// Entities/s as a percentage of the partition target.
    pub pct_of_target: f64,
    /// Over the window rounded out to 10 s chunks, ≤ 12.5 % error.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Entities per second over the window, oldest first (for a sparkline).
    pub entities_series: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TableScans {
    pub account: String,
    pub table: String,
    pub queries: u64,
    pub entities: u64,
}

/// Queries not pinned to one partition, in the window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ScanSummary {
    pub queries: u64,
    pub entities: u64,
    /// Busiest first.
    pub tables: Vec<TableScans>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    HotPartition,
    AccountOverTarget,
    AppendOnly,
    PrependOnly,
    TableScan,
    RetryStorm,
}

impl WarningKind {
    /// The one-line reason, drawn from the seeds (best practices and scalability targets).
    pub fn why(self) -> &'static str {
        match self {
            WarningKind::HotPartition => {
                "a partition is served by one server; over its target the service throttles it \
                 with 503 ServerBusy: spread the load over more PartitionKeys"
            }
            WarningKind::AccountOverTarget => {
                "over the account's scalability target the service throttles the account when \
                 under load, however well the tables are partitioned"
            }
            WarningKind::AppendOnly => {
                "lexically increasing PartitionKeys all land in the last range partition, on one \
                 server, so load balancing cannot raise write throughput"
            }
            WarningKind::PrependOnly => {
                "lexically decreasing PartitionKeys all land in the first range partition, on \
                 one server, so load balancing cannot raise write throughput"
            }
            WarningKind::TableScan => {
                "a query without a PartitionKey equality scans across partitions and follows \
                 continuation tokens: avoid scans for dominant queries"
            }
            WarningKind::RetryStorm => {
                "clients retrying without exponential backoff keep a throttled partition \
                 overloaded, and throttled requests are billed too"
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Warning {
    pub kind: WarningKind,
    /// What it is about, with the numbers: "orders/2024-06: 2,450 entities/s (122 % of 2,000)".
    pub subject: String,
    pub why: &'static str,
}

impl Warning {
    fn new(kind: WarningKind, subject: String) -> Warning {
        Warning {
            kind,
            subject,
            why: kind.why(),
        }
    }
}

/// Everything the dashboard draws, at one moment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Snapshot {
    /// The last second of the window.
    pub now_unix_secs: u64,
    pub window_secs: u32,
    pub rank_by: RankBy,
    pub partition_target: u32,
    pub account_target: u32,
    /// Busiest (by entities) first.
    pub accounts: Vec<AccountSnapshot>,
    /// The top partitions by `rank_by`.
    pub partitions: Vec<PartitionSnapshot>,
    /// All traffic not in `partitions`: untracked and unlisted partitions, scans, table
    /// operations. Accounts' totals = Σ partitions + other.
    pub other: Totals,
    /// Partitions the sketch tracks now (at most its capacity).
    pub tracked_partitions: usize,
    pub scans: ScanSummary,
    pub warnings: Vec<Warning>,
    /// Records ignored as too old or too far ahead of the clock, since the start.
    pub dropped_records: u64,
}

impl Snapshot {
    /// The busiest account, when there was any traffic.
    pub fn account(&self) -> Option<&AccountSnapshot> {
        self.accounts.first()
    }

    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// One header, then a row per account, listed partition, "other", and account second
    /// (`kind` = account | partition | other | second).
    pub fn to_csv(&self) -> Result<String, csv::Error> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "kind",
            "unix_secs",
            "account",
            "table",
            "partition_key",
            "requests",
            "entities",
            "successes",
            "server_busy",
            "server_timeouts",
            "client_timeouts",
            "other_errors",
            "retries",
            "entities_per_s",
            "requests_per_s",
            "throttled_pct",
            "pct_of_target",
            "p50_ms",
            "p99_ms",
        ])?;
        let opt = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
        let secs = f64::from(self.window_secs);
        let row = |kind: &str,
                   at: String,
                   account: &str,
                   table: &str,
                   key: &str,
                   t: &Totals,
                   target: Option<f64>,
                   p50: Option<f64>,
                   p99: Option<f64>| {
            let (eps, rps) = if kind == "second" {
                (t.entities as f64, t.requests as f64)
            } else {
                (t.entities as f64 / secs, t.requests as f64 / secs)
            };
            vec![
                kind.to_string(),
                at,
                account.to_string(),
                table.to_string(),
                key.to_string(),
                t.requests.to_string(),
                t.entities.to_string(),
                t.successes.to_string(),
                t.server_busy.to_string(),
                t.server_timeouts.to_string(),
                t.client_timeouts.to_string(),
                t.other_errors.to_string(),
                t.retries.to_string(),
                format!("{eps:.3}"),
                format!("{rps:.3}"),
                format!("{:.3}", t.throttled_pct()),
                target.map(|v| format!("{v:.3}")).unwrap_or_default(),
                opt(p50),
                opt(p99),
            ]
        };
        let now = self.now_unix_secs.to_string();
        for a in &self.accounts {
            w.write_record(row(
                "account",
                now.clone(),
                &a.account,
                "",
                "",
                &a.totals,
                Some(a.pct_of_target),
                a.p50_ms,
                a.p99_ms,
            ))?;
        }
        for p in &self.partitions {
            w.write_record(row(
                "partition",
                now.clone(),
                &p.account,
                &p.table,
                &p.partition_key,
                &p.totals,
                Some(p.pct_of_target),
                p.p50_ms,
                p.p99_ms,
            ))?;
        }
        w.write_record(row(
            "other",
            now.clone(),
            "",
            "",
            "",
            &self.other,
            None,
            None,
            None,
        ))?;
        for a in &self.accounts {
            for s in &a.series {
                w.write_record(row(
                    "second",
                    s.unix_secs.to_string(),
                    &a.account,
                    "",
                    "",
                    &s.totals,
                    None,
                    None,
                    None,
                ))?;
            }
        }
        let bytes = w
            .into_inner()
            .map_err(|e| csv::Error::from(e.into_error()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// `1234567.8` → "1,234,568": warnings are read by people.
fn grouped(v: f64) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn ms(d: Option<std::time::Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64() * 1000.0)
}

pub(super) fn build(
    st: &State,
    targets: Targets,
    window: u32,
    now: u32,
    rank_by: RankBy,
) -> Snapshot {
    let from = now.saturating_sub(window - 1).max(1);
    let secs = f64::from(window);
    let part_target = targets.partition_entities_per_s.max(1);
    let acct_target = targets.account_entities_per_s.max(1);
    let rules = st.config.rules;
    let mut warnings = Vec::new();
    let mut other = Totals::default();

    // Accounts: per-second series, totals, merged latency.
    let mut accounts = Vec::with_capacity(st.accounts.len());
    let mut lat = Box::new([0u32; FINE_LEN]);
    for acc in &st.accounts {
        lat.fill(0);
        let mut totals = Totals::default();
        let mut series = Vec::with_capacity(window as usize);
        let mut stormy = 0u32;
        let mut peak_retries = 0u32;
        for sec in from..=now {
            let mut s = Totals::default();
            if let Some(b) = acc.ring.get(sec) {
                s.add(&b.counts);
                if let Some(h) = &b.latency {
                    h.add_into(&mut lat);
                }
                // A stormy second: many retries that are a large share of the attempts.
                let c = &b.counts;
                if c.retries >= rules.retry_min_per_s
                    && f64::from(c.retries) > rules.retry_min_share * f64::from(c.requests)
                {
                    stormy += 1;
                }
                peak_retries = peak_retries.max(c.retries);
            }
            totals.add_totals(&s);
            series.push(SecondStats {
                unix_secs: u64::from(sec),
                totals: s,
            });
        }
        if totals.requests == 0 {
            continue;
        }
        other.add_totals(&totals);
        let eps = totals.entities as f64 / secs;
        if eps > f64::from(acct_target) {
            warnings.push(Warning::new(
                WarningKind::AccountOverTarget,
                format!(
                    "account {}: {} entities/s ({:.0} % of {})",
                    acc.name,
                    grouped(eps),
                    eps * 100.0 / f64::from(acct_target),
                    grouped(f64::from(acct_target))
                ),
            ));
        }
        // Exponential backoff spreads retries out; several seconds each with many retries
        // making a large share of attempts mean clients retry without backing off.
        if stormy >= rules.retry_min_seconds {
            warnings.push(Warning::new(
                WarningKind::RetryStorm,
                format!(
                    "account {}: {} retries ({:.0} % of attempts), {stormy} s with ≥ {}/s, peak {}/s",
                    acc.name,
                    grouped(totals.retries as f64),
                    pct(totals.retries, totals.requests),
                    rules.retry_min_per_s,
                    peak_retries
                ),
            ));
        }
        accounts.push(AccountSnapshot {
            account: acc.name.to_string(),
            totals,
            entities_per_s: eps,
            requests_per_s: totals.requests as f64 / secs,
            retries_per_s: totals.retries as f64 / secs,
            throttled_pct: totals.throttled_pct(),
            pct_of_target: eps * 100.0 / f64::from(acct_target),
            p50_ms: ms(FineHist::quantile_of(&lat, 0.5)),
            p99_ms: ms(FineHist::quantile_of(&lat, 0.99)),
            series,
        });
    }
    accounts.sort_by(|a, b| {
        b.totals
            .entities
            .cmp(&a.totals.entities)
            .then_with(|| a.account.cmp(&b.account))
    });

    // Tables: scans and key order.
    let mut scans = ScanSummary::default();
    for acc in &st.accounts {
        for t in acc.tables.values() {
            let mut sum = TableSecond::default();
            for sec in from..=now {
                if let Some(s) = t.ring.get(sec) {
                    sum.inserts = sum.inserts.saturating_add(s.inserts);
                    sum.increases = sum.increases.saturating_add(s.increases);
                    sum.decreases = sum.decreases.saturating_add(s.decreases);
                    sum.scans = sum.scans.saturating_add(s.scans);
                    sum.scan_entities = sum.scan_entities.saturating_add(s.scan_entities);
                }
            }
            if sum.scans > 0 {
                scans.queries += u64::from(sum.scans);
                scans.entities += u64::from(sum.scan_entities);
                scans.tables.push(TableScans {
                    account: acc.name.to_string(),
                    table: t.name.to_string(),
                    queries: u64::from(sum.scans),
                    entities: u64::from(sum.scan_entities),
                });
            }
            let changes = sum.increases + sum.decreases;
            let (kind, dominant) = if sum.increases >= sum.decreases {
                (WarningKind::AppendOnly, sum.increases)
            } else {
                (WarningKind::PrependOnly, sum.decreases)
            };
            if t.track_order
                && sum.inserts >= rules.order_min_inserts
                && dominant >= rules.order_min_changes
                && f64::from(dominant) >= rules.order_min_share * f64::from(changes)
            {
                let dir = if kind == WarningKind::AppendOnly {
                    "increasing"
                } else {
                    "decreasing"
                };
                warnings.push(Warning::new(
                    kind,
                    format!(
                        "table {}: {} of {} key changes {dir} over {} inserts",
                        t.name, dominant, changes, sum.inserts
                    ),
                ));
            }
        }
    }
    scans.tables.sort_by(|a, b| {
        b.queries
            .cmp(&a.queries)
            .then_with(|| a.table.cmp(&b.table))
    });
    if scans.queries >= u64::from(rules.scan_min_queries.max(1)) {
        let mut names: Vec<String> = scans
            .tables
            .iter()
            .take(3)
            .map(|t| format!("{} ({})", t.table, t.queries))
            .collect();
        if scans.tables.len() > 3 {
            names.push(format!("+{} more", scans.tables.len() - 3));
        }
        warnings.push(Warning::new(
            WarningKind::TableScan,
            format!(
                "{} scan queries returning {} entities: {}",
                grouped(scans.queries as f64),
                grouped(scans.entities as f64),
                names.join(", ")
            ),
        ));
    }

    // Partitions: totals of every tracked one (hot ones warn even if unlisted), then the top.
    let mut ranked: Vec<(usize, Totals)> = Vec::new();
    for (i, slot) in st.slots.iter().enumerate() {
        let mut t = Totals::default();
        for sec in from.max(slot.since)..=now {
            if let Some(c) = slot.ring.get(sec) {
                t.add(c);
            }
        }
        if t.requests == 0 {
            continue;
        }
        let eps = t.entities as f64 / secs;
        // A throttled partition cannot succeed much beyond its limit, so sustained throttling
        // near the target marks it hot too (as the service's 503s would).
        let throttled_near_target =
            t.throttled_pct() >= 5.0 && t.throttled() >= 10 && eps >= f64::from(part_target) * 0.5;
        if eps > f64::from(part_target) || throttled_near_target {
            warnings.push(Warning::new(
                WarningKind::HotPartition,
                format!(
                    "{}/{}: {} entities/s ({:.0} % of {}), {:.1} % throttled",
                    slot.table,
                    slot.key,
                    grouped(eps),
                    eps * 100.0 / f64::from(part_target),
                    grouped(f64::from(part_target)),
                    t.throttled_pct()
                ),
            ));
        }
        ranked.push((i, t));
    }
    let key = |t: &Totals| match rank_by {
        RankBy::Entities => (t.entities, t.requests),
        RankBy::Throttled => (t.throttled(), t.entities),
    };
    ranked.sort_by(|(ia, a), (ib, b)| {
        key(b).cmp(&key(a)).then_with(|| {
            let (sa, sb) = (&st.slots[*ia], &st.slots[*ib]);
            (&sa.table, &sa.key).cmp(&(&sb.table, &sb.key))
        })
    });
    ranked.truncate(st.config.top_n);

    let mut partitions = Vec::with_capacity(ranked.len());
    let mut lat = [0u32; COARSE_LEN];
    for (i, totals) in ranked {
        let slot = &st.slots[i];
        let mut series = Vec::with_capacity(window as usize);
        for sec in from..=now {
            let v = if sec >= slot.since {
                slot.ring.get(sec).map_or(0, |c| c.entities)
            } else {
                0
            };
            series.push(v);
        }
        lat.fill(0);
        let first_chunk = from.max(slot.since) / LATENCY_CHUNK_SECS;
        for chunk in first_chunk..=now / LATENCY_CHUNK_SECS {
            if let Some(h) = slot.latency.get(chunk * LATENCY_CHUNK_SECS) {
                h.add_into(&mut lat);
            }
        }
        other = other.minus(&totals);
        let eps = totals.entities as f64 / secs;
        partitions.push(PartitionSnapshot {
            account: st.accounts[slot.account as usize].name.to_string(),
            table: slot.table.to_string(),
            partition_key: slot.key.to_string(),
            key_truncated: slot.key_truncated,
            exact: slot.since <= from,
            totals,
            entities_per_s: eps,
            requests_per_s: totals.requests as f64 / secs,
            throttled_pct: totals.throttled_pct(),
            pct_of_target: eps * 100.0 / f64::from(part_target),
            p50_ms: ms(CoarseHist::quantile_of(&lat, 0.5)),
            p99_ms: ms(CoarseHist::quantile_of(&lat, 0.99)),
            entities_series: series,
        });
    }

    warnings.sort_by_key(|w| w.kind as u8);
    Snapshot {
        now_unix_secs: u64::from(now),
        window_secs: window,
        rank_by,
        partition_target: part_target,
        account_target: acct_target,
        accounts,
        partitions,
        other,
        tracked_partitions: st.slots.len(),
        scans,
        warnings,
        dropped_records: st.dropped,
    }
}
