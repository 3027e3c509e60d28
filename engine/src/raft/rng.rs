//! The core's own deterministic PRNG (splitmix64): jitter, backoff and random choices replay
//! exactly from `RaftConfig::seed`.

#[derive(Clone, Debug)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// Mixes the node id in so that nodes sharing a seed still draw different timeouts.
    pub(crate) fn new(seed: u64, node_id: i32) -> Self {
        let mut rng = Self {
            state: seed ^ (u64::from(node_id as u32)).wrapping_mul(0xA24B_AED4_963E_E407),
        };
        rng.next_u64();
        rng
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max` (modulo bias is irrelevant for timer jitter).
    pub(crate) fn up_to(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        match max.checked_add(1) {
            Some(bound) => self.next_u64() % bound,
            None => self.next_u64(), // max = u64::MAX: every value is in range
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn same_seed_same_sequence_and_node_id_matters() {
        let mut a = SplitMix64::new(7, 1);
        let mut b = SplitMix64::new(7, 1);
        let mut c = SplitMix64::new(7, 2);
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..4).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        assert!((0..100).all(|_| a.up_to(5) <= 5));
    }
}
