//! SplitMix64 (Steele, Lea and Flood, 2014): the one small seeded generator of hxlab, for
//! figures that must come out the same on every run (bootstrap resampling, a link's seeded
//! draws, filler bytes). Not for anything secret.

/// A SplitMix64 generator: its whole sequence is fixed by the seed, on every platform and
/// in every version.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An index below `n` (the remainder of the next draw: a bias of at most n / 2^64, which
    /// resampling does not notice). `n` must not be 0.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_sequence() {
        // The first outputs for seed 0 of the reference implementation (Vigna's splitmix64.c).
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(g.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn below_stays_below() {
        let mut g = SplitMix64::new(7);
        assert!((0..1000).all(|_| g.below(3) < 3));
    }
}
