//! Stored times as people read them. A store keeps the writer's clock in µs: wall-clock time since the Unix epoch
//! in production, virtual time from 0 in replays; the first is shown as a UTC date and time, the second as an
//! offset.

use headstart::store::owner::rfc3339_seconds;
use headstart_timeline::format_ms;

/// Times below this (µs; September 2001) are a virtual clock's, not dates.
const EARLIEST_DATE_US: i64 = 1_000_000_000_000_000;

/// `2026-05-01 12:00:03 UTC` for a wall-clock time, `+1234 ms` for a virtual one.
pub fn clock(us: i64) -> String {
    if us < EARLIEST_DATE_US {
        #[allow(clippy::cast_precision_loss)]
        let ms = us as f64 / 1000.0;
        return format!("+{} ms", format_ms(ms));
    }
    // One calendar for the whole workspace: the owner files' RFC 3339 stamp, `T` and `Z` spelled out.
    let stamp = rfc3339_seconds(us);
    format!("{} UTC", stamp.replacen('T', " ", 1).trim_end_matches('Z'))
}

/// Milliseconds relative to `origin_us`, for times within a session: `+12.5 ms`.
pub fn offset(us: i64, origin_us: i64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let ms = (us - origin_us) as f64 / 1000.0;
    format!("+{} ms", format_ms(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_times_are_dates_and_virtual_ones_offsets() {
        assert_eq!(clock(0), "+0 ms");
        assert_eq!(clock(1_500), "+1.5 ms");
        assert_eq!(clock(1_000_000_000_000_000), "2001-09-09 01:46:40 UTC");
        assert_eq!(clock(1_709_251_199_000_000), "2024-02-29 23:59:59 UTC");
        assert_eq!(offset(2_250, 1_000), "+1.25 ms");
    }
}
