//! xorshift64 (Marsaglia's 13, 7, 17): a tiny deterministic generator for test data outside
//! the simulation (payload patterns, noise, crash points), where a seed must replay a failure
//! but [`super::SimRng`]'s quality is not needed. The simulation itself never draws from it.

/// The state must not be 0 (it would stay 0).
#[derive(Clone, Debug)]
pub struct XorShift64(pub u64);

impl XorShift64 {
    /// Steps the state and returns it.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `len` bytes, the low byte of each next state.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}
