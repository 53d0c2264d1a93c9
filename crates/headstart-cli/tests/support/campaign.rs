//! What the kill campaigns share (`crash.rs`, `fleet.rs`, `restate_chaos.rs`): a seeded generator, so a run can be
//! repeated from the seed it prints, and the numbers they take from the environment.

use std::time::Duration;

/// SplitMix64: a small seeded generator (no dependency needed for a few uniform draws).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[low, high)` milliseconds.
    pub fn between_ms(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.next_u64() % (high - low).max(1))
    }
}

/// The number in the environment variable `name`, if set.
///
/// # Panics
///
/// When it is set to something else than a number: a campaign must not run with a count its caller did not mean.
pub fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
    )
}

/// The seed in `name`, or one from the clock and the process id.
pub fn seed(name: &str) -> u64 {
    env_number(name).unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        (nanos as u64) ^ u64::from(std::process::id())
    })
}
