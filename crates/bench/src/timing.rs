//! Timing helpers shared by every subcommand.

use std::time::{Duration, Instant};

/// Shortest measurement of a throughput: passes are repeated until at least
/// this much time has been spent.
pub const MIN_MEASURE: Duration = Duration::from_millis(200);

/// Runs `f` once; returns its result and the elapsed seconds.
pub fn time<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed().as_secs_f64())
}

/// A throughput measurement.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    pub ops: u64,
    pub secs: f64,
    pub passes: u32,
}

impl Rate {
    pub fn per_s(&self) -> f64 {
        self.ops as f64 / self.secs
    }
}

/// Repeats `pass` (which performs `ops_per_pass` operations, and checks them)
/// until `MIN_MEASURE` has elapsed, counting every pass. Returns the result of
/// the last pass and the rate over all of them.
pub fn measure_rate<T>(ops_per_pass: usize, mut pass: impl FnMut() -> T) -> (T, Rate) {
    assert!(ops_per_pass > 0, "a measured pass must do some work");
    let start = Instant::now();
    let mut passes = 0u32;
    loop {
        let out = pass();
        passes += 1;
        let elapsed = start.elapsed();
        if elapsed >= MIN_MEASURE {
            let ops = ops_per_pass as u64 * passes as u64;
            return (out, Rate { ops, secs: elapsed.as_secs_f64(), passes });
        }
        drop(out);
    }
}

/// Peak resident set size of this process in MiB (`VmHWM`), if known.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measure_rate_runs_for_the_minimum_time() {
        let mut calls = 0;
        let (last, rate) = measure_rate(3, || {
            calls += 1;
            std::thread::sleep(Duration::from_millis(30));
            calls
        });
        assert_eq!(last, calls);
        assert_eq!(rate.passes, calls);
        assert_eq!(rate.ops, 3 * calls as u64);
        assert!(rate.secs >= MIN_MEASURE.as_secs_f64());
        assert!(rate.per_s() > 0.0);
    }

    #[test]
    fn peak_rss_is_positive_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_mib().unwrap() > 0.0);
        }
    }
}
