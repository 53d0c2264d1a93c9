//! Stored times as people read them. A store keeps the writer's clock in µs: wall-clock time since the Unix epoch
//! in production, virtual time from 0 in replays; the first is shown as a UTC date and time, the second as an
//! offset.

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
    let seconds = us.div_euclid(1_000_000);
    let (days, in_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60
    )
}

/// Milliseconds relative to `origin_us`, for times within a session: `+12.5 ms`.
pub fn offset(us: i64, origin_us: i64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let ms = (us - origin_us) as f64 / 1000.0;
    format!("+{} ms", format_ms(ms))
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
