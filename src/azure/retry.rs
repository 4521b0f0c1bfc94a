//! The retry policy: which failures are retried and how long to wait (the seeds' formula
//! `y = Rand(0.8z, 1.2z)·(2^x − 1)`, `y = min(zmin + y, zmax)`).

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Total attempts including the first (1 = never retry).
    pub max_attempts: u32,
    /// z: the base delay that doubles with every retry.
    pub base_delay: Duration,
    /// zmin: added to every delay.
    pub min_delay: Duration,
    /// zmax: no delay is longer.
    pub max_delay: Duration,
    /// Each HTTP attempt (request and full response body) must finish within this.
    pub attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    /// Interactive: the first retry comes after ~0.3 s, a whole retry sequence stays within
    /// seconds.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(200),
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            attempt_timeout: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The seeds' slower profile for bulk jobs (3 s minimum, 30 s base, 90 s maximum).
    pub fn bulk() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_secs(30),
            min_delay: Duration::from_secs(3),
            max_delay: Duration::from_secs(90),
            attempt_timeout: Duration::from_secs(30),
        }
    }

    pub fn never() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `retry` (1 for the first retry), with `jitter` in
    /// [0.8, 1.2].
    pub fn delay_with_jitter(&self, retry: u32, jitter: f64) -> Duration {
        let factor = 2f64.powi(retry.min(30) as i32) - 1.0;
        let y = self.base_delay.as_secs_f64() * jitter.clamp(0.8, 1.2) * factor;
        let total = (self.min_delay.as_secs_f64() + y).min(self.max_delay.as_secs_f64());
        Duration::from_secs_f64(total.max(0.0))
    }

    pub fn delay(&self, retry: u32) -> Duration {
        self.delay_with_jitter(retry, 0.8 + fastrand::f64() * 0.4)
    }
}

/// Whether a status is worth another attempt: timeouts, throttling and server errors, except
/// 501 Not Implemented and 505 HTTP Version Not Supported, which never change.
/// 429 is Cosmos DB's throttling answer (Azure Storage never sends it), so it is retried too.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_exponentially_within_bounds() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay_with_jitter(1, 1.0), Duration::from_millis(300));
        assert_eq!(p.delay_with_jitter(2, 1.0), Duration::from_millis(700));
        assert_eq!(p.delay_with_jitter(3, 1.0), Duration::from_millis(1500));
        assert_eq!(p.delay_with_jitter(20, 1.0), Duration::from_secs(5));
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay_with_jitter(1, 0.8), Duration::from_millis(260));
        assert_eq!(p.delay_with_jitter(1, 1.2), Duration::from_millis(340));
        assert_eq!(p.delay_with_jitter(1, 5.0), Duration::from_millis(340));
        for _ in 0..100 {
            let d = p.delay(1);
            assert!(
                d >= Duration::from_millis(260) && d <= Duration::from_millis(340),
                "{d:?}"
            );
        }
    }

    #[test]
    fn bulk_profile_matches_the_seeds() {
        let p = RetryPolicy::bulk();
        assert_eq!(p.delay_with_jitter(1, 1.0), Duration::from_secs(33));
        assert_eq!(p.delay_with_jitter(2, 1.0), Duration::from_secs(90));
    }

    #[test]
    fn only_transient_statuses_are_retried() {
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 409, 412, 413, 501, 505] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }
}
