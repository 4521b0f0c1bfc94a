//! Log-linear latency histograms (the HDR layout without the crate): a value falls in an
//! octave and then in one of `2^SUB_BITS` equal steps of it, so the midpoint of a bucket is
//! within `1 / 2^(SUB_BITS+1)` of any value in it. Two sizes: `FineHist` (per account and
//! second, ≤ 1.6 % error) and `CoarseHist` (per partition and 10 s chunk, ~300 bytes).

use std::time::Duration;

/// Bucket index of `v` in a log-linear layout with `2^sub_bits` steps per octave.
fn index(v: u64, sub_bits: u32) -> usize {
    let sub = 1u64 << sub_bits;
    if v < sub {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - sub_bits;
    ((shift as u64 + 1) * sub + ((v >> shift) - sub)) as usize
}

/// The midpoint of bucket `idx` (exact below `2^sub_bits`).
fn midpoint(idx: usize, sub_bits: u32) -> u64 {
    let sub = 1usize << sub_bits;
    if idx < sub {
        return idx as u64;
    }
    let shift = (idx / sub - 1) as u32;
    let m = (idx % sub + sub) as u64;
    let low = m << shift;
    low + ((1u64 << shift) >> 1)
}

/// Number of buckets that hold every value below `2^(max_msb+1)`.
const fn len_for(max_msb: u32, sub_bits: u32) -> usize {
    ((max_msb - sub_bits + 2) as usize) << sub_bits
}

/// The value at quantile `q` (0 < q ≤ 1) of `counts`, as a bucket midpoint; None when empty.
fn quantile(counts: &[u32], q: f64, sub_bits: u32) -> Option<u64> {
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    if total == 0 {
        return None;
    }
    // The nearest-rank definition: the smallest value with at least q·total samples at or below.
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0u64;
    for (idx, &c) in counts.iter().enumerate() {
        seen += u64::from(c);
        if seen >= rank {
            return Some(midpoint(idx, sub_bits));
        }
    }
    None
}

const FINE_SUB_BITS: u32 = 5;
/// Microseconds up to 2^27 µs (134 s); longer latencies count in the last bucket.
const FINE_MAX_MSB: u32 = 26;
pub const FINE_LEN: usize = len_for(FINE_MAX_MSB, FINE_SUB_BITS);
const FINE_MAX: u64 = (1 << (FINE_MAX_MSB + 1)) - 1;

/// Per-second account latency, in microseconds, 32 steps per octave.
#[derive(Clone)]
pub struct FineHist {
    counts: Box<[u32; FINE_LEN]>,
}

impl Default for FineHist {
    fn default() -> Self {
        FineHist {
            counts: Box::new([0; FINE_LEN]),
        }
    }
}

impl FineHist {
    pub fn record(&mut self, latency: Duration) {
        let us = (latency.as_micros().min(u128::from(FINE_MAX))) as u64;
        let slot = &mut self.counts[index(us, FINE_SUB_BITS)];
        *slot = slot.saturating_add(1);
    }

    pub fn clear(&mut self) {
        self.counts.fill(0);
    }

    pub fn add_into(&self, acc: &mut [u32; FINE_LEN]) {
        for (a, c) in acc.iter_mut().zip(self.counts.iter()) {
            *a = a.saturating_add(*c);
        }
    }

    pub fn quantile_of(counts: &[u32; FINE_LEN], q: f64) -> Option<Duration> {
        quantile(counts, q, FINE_SUB_BITS).map(Duration::from_micros)
    }
}

const COARSE_SUB_BITS: u32 = 2;
/// Units of 128 µs: below that, partition latencies are not worth telling apart.
const COARSE_UNIT_SHIFT: u32 = 7;
/// 2^20 units of 128 µs = 134 s.
const COARSE_MAX_MSB: u32 = 19;
pub const COARSE_LEN: usize = len_for(COARSE_MAX_MSB, COARSE_SUB_BITS);
const COARSE_MAX: u64 = (1 << (COARSE_MAX_MSB + 1)) - 1;

/// Per-partition latency over a chunk of seconds: 4 steps per octave (≤ 12.5 % error).
#[derive(Clone)]
pub struct CoarseHist {
    pub counts: [u32; COARSE_LEN],
}

impl Default for CoarseHist {
    fn default() -> Self {
        CoarseHist {
            counts: [0; COARSE_LEN],
        }
    }
}

impl CoarseHist {
    pub fn record(&mut self, latency: Duration) {
        let units = ((latency.as_micros() >> COARSE_UNIT_SHIFT).min(u128::from(COARSE_MAX))) as u64;
        let slot = &mut self.counts[index(units, COARSE_SUB_BITS)];
        *slot = slot.saturating_add(1);
    }

    pub fn add_into(&self, acc: &mut [u32; COARSE_LEN]) {
        for (a, c) in acc.iter_mut().zip(self.counts.iter()) {
            *a = a.saturating_add(*c);
        }
    }

    pub fn quantile_of(counts: &[u32; COARSE_LEN], q: f64) -> Option<Duration> {
        quantile(counts, q, COARSE_SUB_BITS)
            .map(|units| Duration::from_micros((units << COARSE_UNIT_SHIFT) + 64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_midpoint_round_trip_within_error() {
        for sub_bits in [2, 5] {
            let bound = 1.0 / f64::from(1u32 << (sub_bits + 1));
            let mut v = 1u64;
            while v < 1 << 30 {
                let mid = midpoint(index(v, sub_bits), sub_bits);
                let err = (mid as f64 - v as f64).abs() / v as f64;
                assert!(err <= bound + 1e-9, "v {v} mid {mid} err {err}");
                v = v * 9 / 8 + 1;
            }
        }
        assert_eq!(index(FINE_MAX, FINE_SUB_BITS), FINE_LEN - 1);
        assert_eq!(index(COARSE_MAX, COARSE_SUB_BITS), COARSE_LEN - 1);
    }

    #[test]
    fn fine_quantiles_are_within_two_percent() {
        let mut h = FineHist::default();
        // 1..=1000 ms, one sample each: p50 = 500 ms, p99 = 990 ms.
        for ms in 1..=1000u64 {
            h.record(Duration::from_millis(ms));
        }
        let mut acc = [0u32; FINE_LEN];
        h.add_into(&mut acc);
        let p50 = FineHist::quantile_of(&acc, 0.5).unwrap().as_secs_f64();
        let p99 = FineHist::quantile_of(&acc, 0.99).unwrap().as_secs_f64();
        assert!((p50 - 0.5).abs() / 0.5 < 0.02, "{p50}");
        assert!((p99 - 0.99).abs() / 0.99 < 0.02, "{p99}");
        assert_eq!(FineHist::quantile_of(&[0; FINE_LEN], 0.5), None);
    }

    #[test]
    fn coarse_quantiles_are_within_fifteen_percent() {
        let mut h = CoarseHist::default();
        for ms in 1..=1000u64 {
            h.record(Duration::from_millis(ms));
        }
        let p99 = CoarseHist::quantile_of(&h.counts, 0.99)
            .unwrap()
            .as_secs_f64();
        assert!((p99 - 0.99).abs() / 0.99 < 0.15, "{p99}");
        assert!(std::mem::size_of::<CoarseHist>() <= 320);
    }
}
