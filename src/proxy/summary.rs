//! The headless proxy's periodic summary: counters fed by a telemetry subscriber and one line per
//! interval (operations, entities/s, 503s, the three busiest partitions). Self-contained on
//! purpose; the dashboard's metrics hub is richer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::azure::telemetry::{AttemptRecord, PartitionRef, Telemetry};

/// Distinct partitions tracked per interval; the rest are summed as "other".
const MAX_PARTITIONS: usize = 10_000;

/// Counts for one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Interval {
    /// Attempt records: one per request, one per operation of a batch.
    pub operations: u64,
    /// Entities of successful operations.
    pub entities: u64,
    pub throttled: u64,
    /// Other responses outside 2xx (and no response at all).
    pub failed: u64,
    /// (table/partition label) → (successful entities, 503s).
    pub partitions: HashMap<String, (u64, u64)>,
}

/// Collects attempt records into interval counters.
#[derive(Clone, Default)]
pub struct Summary {
    current: Arc<Mutex<Interval>>,
}

impl Summary {
    /// Subscribes to `telemetry`; every record from now on is counted.
    pub fn attach(telemetry: &Telemetry) -> Summary {
        let summary = Summary::default();
        let sink = summary.clone();
        telemetry.subscribe_fn(move |r| sink.record(r));
        summary
    }

    pub fn record(&self, r: &AttemptRecord) {
        let Ok(mut cur) = self.current.lock() else {
            return;
        };
        cur.operations += 1;
        let throttled = r.status == Some(503);
        if r.succeeded() {
            cur.entities += u64::from(r.entity_count);
        } else if throttled {
            cur.throttled += 1;
        } else {
            cur.failed += 1;
        }
        if let PartitionRef::None = r.partition {
            return;
        }
        let label = partition_label(r);
        let known = cur.partitions.contains_key(&label);
        let key = if known || cur.partitions.len() < MAX_PARTITIONS {
            label
        } else {
            "other".to_string()
        };
        let slot = cur.partitions.entry(key).or_default();
        if r.succeeded() {
            slot.0 += u64::from(r.entity_count);
        }
        if throttled {
            slot.1 += 1;
        }
    }

    /// The counts since the last call, resetting them.
    pub fn take(&self) -> Interval {
        self.current
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    }
}

fn partition_label(r: &AttemptRecord) -> String {
    let table = r.table.as_deref().unwrap_or("?");
    match &r.partition {
        PartitionRef::Key(pk) => format!("{table}/{}", printable(pk)),
        PartitionRef::Scan => format!("{table}/(scan)"),
        PartitionRef::None => table.to_string(),
    }
}

/// Keys may hold control-free but odd text; keep a summary line on one line and short.
fn printable(pk: &str) -> String {
    let mut s: String = pk
        .chars()
        .map(|c| if c.is_control() { '·' } else { c })
        .take(40)
        .collect();
    if pk.chars().count() > 40 {
        s.push('…');
    }
    if s.is_empty() {
        s.push_str("''");
    }
    s
}

/// One line: `ops 812 (162.4/s)  entities 150.0/s  503 ×40  errors 0  top: t/EU 100.0/s (503 ×40), …`.
pub fn summary_line(interval: &Interval, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let mut top: Vec<(&String, &(u64, u64))> = interval.partitions.iter().collect();
    top.sort_by(|a, b| {
        (b.1 .0, b.1 .1)
            .cmp(&(a.1 .0, a.1 .1))
            .then_with(|| a.0.cmp(b.0))
    });
    let top: Vec<String> = top
        .into_iter()
        .take(3)
        .map(|(label, (entities, busy))| {
            let rate = *entities as f64 / secs;
            if *busy > 0 {
                format!("{label} {rate:.1}/s (503 ×{busy})")
            } else {
                format!("{label} {rate:.1}/s")
            }
        })
        .collect();
    format!(
        "ops {} ({:.1}/s)  entities {:.1}/s  503 ×{}  errors {}  top: {}",
        interval.operations,
        interval.operations as f64 / secs,
        interval.entities as f64 / secs,
        interval.throttled,
        interval.failed,
        if top.is_empty() {
            "-".to_string()
        } else {
            top.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::telemetry::Operation;
    use std::time::SystemTime;

    fn rec(pk: &str, status: u16, entities: u32) -> AttemptRecord {
        AttemptRecord {
            time: SystemTime::now(),
            account: "acct".into(),
            table: Some("Orders".into()),
            operation: Operation::InsertEntity,
            partition: PartitionRef::Key(pk.into()),
            entity_count: entities,
            status: Some(status),
            error_code: None,
            attempt: 1,
            latency: Duration::from_millis(3),
            bytes_sent: 10,
            bytes_received: 0,
            timed_out: false,
        }
    }

    #[test]
    fn the_line_ranks_partitions_by_entities_per_second() {
        let s = Summary::default();
        for _ in 0..100 {
            s.record(&rec("EU", 204, 1));
        }
        for _ in 0..40 {
            s.record(&rec("EU", 503, 1));
        }
        for _ in 0..20 {
            s.record(&rec("US", 204, 1));
        }
        s.record(&rec("AS", 204, 5));
        s.record(&rec("ZZ", 409, 1));
        let line = summary_line(&s.take(), Duration::from_secs(2));
        assert_eq!(
            line,
            "ops 162 (81.0/s)  entities 62.5/s  503 ×40  errors 1  top: Orders/EU 50.0/s (503 ×40), Orders/US 10.0/s, Orders/AS 2.5/s"
        );
        assert_eq!(s.take(), Interval::default());
        assert!(summary_line(&Interval::default(), Duration::from_secs(5)).ends_with("top: -"));
    }
}
