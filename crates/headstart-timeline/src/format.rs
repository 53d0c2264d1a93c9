//! Times as people read them.

/// Formats milliseconds for people: whole values without decimals, small values with up to two.
pub fn format_ms(ms: f64) -> String {
    let text = if ms.abs() >= 100.0 || ms.fract() == 0.0 {
        format!("{ms:.0}")
    } else if ms.abs() >= 10.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.2}")
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    };
    if text == "-0" {
        "0".to_owned()
    } else {
        text
    }
}
