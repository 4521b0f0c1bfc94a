//! The throttling simulation: a token bucket per (table, partition) refilled at the configured
//! entities per second with a burst of one second's worth, like the service's per-partition
//! target. Point reads and writes cost 1, a batch costs its operation count, a query costs 1 up
//! front and the rest of its returned entities afterwards (the bucket may go into debt, and the
//! partition is refused until the debt is repaid). Scans and table operations are not throttled.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Buckets are swept when the map has doubled since the last sweep (and at least this many).
const SWEEP_FLOOR: usize = 1024;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

#[derive(Debug)]
pub struct Throttle {
    rate: f64,
    burst: f64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    buckets: HashMap<(String, String), Bucket>,
    sweep_at: usize,
}

impl Throttle {
    /// `rate` entities per second per partition (must be positive and finite).
    pub fn new(rate: f64) -> Throttle {
        let rate = if rate.is_finite() && rate > 0.0 {
            rate
        } else {
            1.0
        };
        Throttle {
            rate,
            burst: rate.max(1.0),
            state: Mutex::new(State {
                buckets: HashMap::new(),
                sweep_at: SWEEP_FLOOR,
            }),
        }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Takes `cost` tokens from each listed partition, all or nothing. False: refuse the request.
    pub fn try_acquire(&self, table: &str, charges: &[(&str, u32)], now: Instant) -> bool {
        let Ok(mut st) = self.state.lock() else {
            return true;
        };
        let keys: Vec<((String, String), f64)> = charges
            .iter()
            .map(|(pk, cost)| {
                (
                    (table.to_ascii_lowercase(), pk.to_string()),
                    f64::from(*cost),
                )
            })
            .collect();
        // A batch larger than the burst could never pass; it may take a full bucket instead.
        let admitted = keys.iter().all(|(key, cost)| {
            let level = st
                .buckets
                .get(key)
                .map_or(self.burst, |b| self.level(b, now));
            level >= cost.min(self.burst)
        });
        if admitted {
            for (key, cost) in keys {
                let level = st
                    .buckets
                    .get(&key)
                    .map_or(self.burst, |b| self.level(b, now));
                st.buckets.insert(
                    key,
                    Bucket {
                        tokens: level - cost,
                        updated: now,
                    },
                );
            }
            self.maybe_sweep(&mut st, now);
        }
        admitted
    }

    /// Charges entities learned after the fact (a query's result), possibly into debt.
    pub fn charge(&self, table: &str, partition: &str, cost: u32, now: Instant) {
        if cost == 0 {
            return;
        }
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let key = (table.to_ascii_lowercase(), partition.to_string());
        let level = st
            .buckets
            .get(&key)
            .map_or(self.burst, |b| self.level(b, now));
        st.buckets.insert(
            key,
            Bucket {
                tokens: level - f64::from(cost),
                updated: now,
            },
        );
        self.maybe_sweep(&mut st, now);
    }

    fn level(&self, b: &Bucket, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(b.updated).as_secs_f64();
        (b.tokens + elapsed * self.rate).min(self.burst)
    }

    /// A full bucket is the same as no bucket, so dropping full ones loses nothing and keeps
    /// only partitions active in roughly the last second (plus those in debt).
    fn maybe_sweep(&self, st: &mut State, now: Instant) {
        if st.buckets.len() < st.sweep_at {
            return;
        }
        st.buckets.retain(|_, b| self.level(b, now) < self.burst);
        st.sweep_at = (st.buckets.len() * 2).max(SWEEP_FLOOR);
    }

    /// Buckets currently held (for tests of the memory bound).
    pub fn bucket_count(&self) -> usize {
        self.state.lock().map_or(0, |s| s.buckets.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_bucket_allows_its_burst_then_the_rate() {
        let t = Throttle::new(10.0);
        let start = Instant::now();
        let passed = (0..30)
            .filter(|_| t.try_acquire("T", &[("p", 1)], start))
            .count();
        assert_eq!(passed, 10);
        // Half a second refills five tokens.
        let later = start + Duration::from_millis(500);
        let passed = (0..30)
            .filter(|_| t.try_acquire("t", &[("p", 1)], later))
            .count();
        assert_eq!(passed, 5);
        assert!(t.try_acquire("t", &[("other", 1)], later));
    }

    #[test]
    fn batches_are_all_or_nothing_and_queries_go_into_debt() {
        let t = Throttle::new(10.0);
        let now = Instant::now();
        assert!(t.try_acquire("t", &[("p", 8)], now));
        assert!(!t.try_acquire("t", &[("p", 3)], now));
        assert!(t.try_acquire("t", &[("p", 2)], now));
        // A query admitted on a full bucket returns 25 entities: 1.5 s of debt.
        assert!(t.try_acquire("t", &[("q", 1)], now));
        t.charge("t", "q", 24, now);
        assert!(!t.try_acquire("t", &[("q", 1)], now + Duration::from_millis(1400)));
        assert!(t.try_acquire("t", &[("q", 1)], now + Duration::from_millis(1600)));
        // Larger than the burst: admitted on a full bucket.
        assert!(t.try_acquire("t", &[("big", 100)], now));
        assert!(!t.try_acquire("t", &[("big", 1)], now + Duration::from_secs(5)));
    }

    #[test]
    fn full_buckets_are_dropped() {
        let t = Throttle::new(1000.0);
        let now = Instant::now();
        for i in 0..5000 {
            t.try_acquire("t", &[(&i.to_string(), 1)], now);
        }
        let later = now + Duration::from_secs(1);
        for i in 0..5000 {
            t.try_acquire("t", &[(&format!("n{i}"), 1)], later);
        }
        assert!(
            t.bucket_count() <= 2 * SWEEP_FLOOR + 5000,
            "{}",
            t.bucket_count()
        );
        assert!(t.bucket_count() >= 5000 - 1, "active buckets kept");
    }
}
