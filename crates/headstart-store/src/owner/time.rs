//! A timestamp in words for owner messages: RFC 3339 in UTC, to the second.

/// `us` (µs since the Unix epoch) as `YYYY-MM-DDTHH:MM:SSZ`, rounded down to the second. Years outside 0..=9999
/// (which no clock in use produces) are written with as many digits as they need.
pub fn rfc3339_seconds(us: i64) -> String {
    let seconds = us.div_euclid(1_000_000);
    let (days, in_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60
    )
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's `civil_from_days`).
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
    fn timestamps_are_utc_to_the_second() {
        // Reference values from `date -u -d … +%s`.
        assert_eq!(rfc3339_seconds(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_seconds(1_796_155_863_999_999), "2026-12-01T20:11:03Z");
        assert_eq!(rfc3339_seconds(951_825_600_000_000), "2000-02-29T12:00:00Z");
        assert_eq!(rfc3339_seconds(-1), "1969-12-31T23:59:59Z");
        // Extremes do not panic.
        assert!(rfc3339_seconds(i64::MIN).ends_with('Z'));
        assert!(rfc3339_seconds(i64::MAX).ends_with('Z'));
    }
}
