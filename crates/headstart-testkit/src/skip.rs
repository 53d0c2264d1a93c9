//! The suite's skip rule for tests that need something outside cargo (python3, Node, a registry, a browser): where
//! it is missing, the test says why and passes as skipped, unless CI's environment variable requires it.

/// `value`, or `None` after printing why `what` is skipped; a panic instead when the environment variable `require`
/// is `1` (CI sets it, so that a missing tool fails the run rather than passing unseen).
pub fn or_skip<T>(require: &str, what: &str, value: Result<T, String>) -> Option<T> {
    match value {
        Ok(value) => Some(value),
        Err(why) if std::env::var(require).is_ok_and(|value| value == "1") => {
            panic!("{what} cannot run, and {require}=1 requires it: {why}")
        }
        Err(why) => {
            eprintln!(
                "SKIPPED: {what} cannot run: {why} (set {require}=1 to make this a failure)\n\
                 ===================================================================================="
            );
            None
        }
    }
}
