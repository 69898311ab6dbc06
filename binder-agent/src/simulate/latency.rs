//! Latency samples and their exact percentiles.

use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;

/// Exact latency percentiles over every sample.
#[derive(Debug, Default)]
pub(super) struct Recorder(Mutex<Vec<Duration>>);

impl Recorder {
    pub(super) fn record(&self, d: Duration) {
        self.0.lock().push(d);
    }

    pub(super) fn summary(&self) -> Option<LatencySummary> {
        LatencySummary::of(&self.0.lock())
    }
}

/// Percentiles of a latency, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: usize,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl LatencySummary {
    /// Nearest-rank percentiles of `samples` (`None` when empty).
    pub fn of(samples: &[Duration]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut v: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        v.sort_by(f64::total_cmp);
        Some(Self {
            count: v.len(),
            mean_ms: v.iter().sum::<f64>() / v.len() as f64,
            p50_ms: percentile(&v, 0.50),
            p99_ms: percentile(&v, 0.99),
            max_ms: v[v.len() - 1],
        })
    }
}

/// Nearest-rank percentile of sorted values.
pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let s = LatencySummary::of(&v).unwrap();
        assert_eq!((s.p50_ms, s.p99_ms, s.max_ms), (50.0, 99.0, 100.0));
        assert!(LatencySummary::of(&[]).is_none());
    }
}
