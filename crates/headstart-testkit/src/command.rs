//! Running a program a test needs from outside cargo (python3, npm, a tool it installed).

use std::process::Command;

/// Runs `command`; its standard output, or why it failed: the command, its status and both outputs.
pub fn output(command: &mut Command) -> Result<String, String> {
    let shown = format!("{command:?}");
    match command.output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => Err(format!(
            "`{shown}` failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(error) => Err(format!("`{shown}` cannot be run: {error}")),
    }
}
