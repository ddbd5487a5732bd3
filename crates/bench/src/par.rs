//! Spreading independent work over the machine's cores, as a syncing client
//! or a serving peer does with chunks.

/// `f(0) … f(n − 1)` computed on every core, returned in order.
pub fn par_map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).clamp(1, n.max(1));
    let per_thread = n.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let f = &f;
        let parts: Vec<_> = (0..threads)
            .map(|t| s.spawn(move || (t * per_thread..((t + 1) * per_thread).min(n)).map(f).collect::<Vec<T>>()))
            .collect();
        parts.into_iter().flat_map(|p| p.join().expect("worker panicked")).collect()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn par_map_keeps_order_and_covers_everything() {
        for n in [0, 1, 2, 3, 17] {
            assert_eq!(super::par_map(n, |i| i * 2), (0..n).map(|i| i * 2).collect::<Vec<_>>());
        }
    }
}
