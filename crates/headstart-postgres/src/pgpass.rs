//! The password file (`~/.pgpass`, `PGPASSFILE` or `passfile=`), read as libpq reads it: lines
//! `host:port:database:user:password`, the first line that matches wins, `*` matches anything, `\` escapes `:`
//! and `\`, lines starting with `#` are comments; on Unix the file is ignored unless only its owner can read it
//! (mode 0600 or stricter).

use std::path::Path;

use crate::conninfo::PassKey;

/// The Unix socket folders libpq counts as `localhost` (the upstream default and Debian's).
const DEFAULT_SOCKET_DIRS: &[&str] = &["/tmp", "/var/run/postgresql", "/run/postgresql"];

/// The password for `key` in the file at `path`: `Ok(None)` when the file does not exist or has no matching
/// line, `Err` (a note for the user, without the password) when the file is there but cannot be used.
pub(crate) fn read(path: &Path, key: &PassKey) -> Result<Option<String>, String> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(format!("the password file {} cannot be read: {err}", path.display())),
    };
    if !metadata.is_file() {
        return Err(format!("the password file {} is not a plain file", path.display()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if metadata.permissions().mode() & 0o077 != 0 {
            return Err(format!(
                "the password file {} was ignored: group or others can access it (chmod 0600 it)",
                path.display()
            ));
        }
    }
    let contents = std::fs::read_to_string(path)
        .map_err(|err| format!("the password file {} cannot be read: {err}", path.display()))?;
    Ok(lookup(&contents, key))
}

/// The password of the first line of `contents` that matches `key`.
pub(crate) fn lookup(contents: &str, key: &PassKey) -> Option<String> {
    let port = key.port.to_string();
    let local = DEFAULT_SOCKET_DIRS.contains(&key.host.as_str());
    contents
        .lines()
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .find_map(|line| {
            let fields = fields(line);
            let [host, port_field, dbname, user, password] = fields.as_slice() else {
                return None;
            };
            let host_matches = host.matches(&key.host) || (local && host.matches("localhost"));
            (host_matches && port_field.matches(&port) && dbname.matches(&key.dbname) && user.matches(&key.user))
                .then(|| password.text.clone())
        })
        .filter(|password| !password.is_empty())
}

/// One field of a line.
struct Field {
    text: String,
    /// The field is an unescaped `*`.
    wildcard: bool,
}

impl Field {
    fn matches(&self, value: &str) -> bool {
        self.wildcard || self.text == value
    }
}

/// The five fields of a line (anything after a fifth `:` is ignored, as libpq does), unescaped.
fn fields(line: &str) -> Vec<Field> {
    let mut fields = Vec::new();
    let (mut text, mut escaped_any) = (String::new(), false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                escaped_any = true;
                text.extend(chars.next());
            }
            ':' => {
                fields.push(Field {
                    wildcard: text == "*" && !escaped_any,
                    text: std::mem::take(&mut text),
                });
                escaped_any = false;
                if fields.len() == 5 {
                    return fields;
                }
            }
            c => text.push(c),
        }
    }
    fields.push(Field {
        wildcard: text == "*" && !escaped_any,
        text,
    });
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(host: &str, port: u16, dbname: &str, user: &str) -> PassKey {
        PassKey {
            host: host.to_owned(),
            port,
            dbname: dbname.to_owned(),
            user: user.to_owned(),
        }
    }

    #[test]
    fn the_first_matching_line_wins_with_wildcards_and_escapes() {
        let file = "# comment\n\
                    db.internal:5432:agents:agent:first\r\n\
                    db.internal:*:*:agent:second\n\
                    *:*:*:*:fallback\n";
        assert_eq!(
            lookup(file, &key("db.internal", 5432, "agents", "agent")),
            Some("first".to_owned())
        );
        assert_eq!(
            lookup(file, &key("db.internal", 6543, "other", "agent")),
            Some("second".to_owned())
        );
        assert_eq!(
            lookup(file, &key("elsewhere", 1, "x", "y")),
            Some("fallback".to_owned())
        );

        let file = "h\\:1:5432:d\\\\b:u:pa\\:ss\\\\w\\ord:ignored\n";
        assert_eq!(
            lookup(file, &key("h:1", 5432, "d\\b", "u")),
            Some("pa:ss\\word".to_owned())
        );
        assert_eq!(lookup(file, &key("h", 5432, "d\\b", "u")), None);

        // An escaped `*` is a literal star, not a wildcard.
        let file = "\\*:*:*:*:star\n";
        assert_eq!(lookup(file, &key("db", 5432, "d", "u")), None);
        assert_eq!(lookup(file, &key("*", 5432, "d", "u")), Some("star".to_owned()));
        // Short lines and empty passwords match nothing.
        assert_eq!(lookup("db:5432:d:u\ndb:5432:d:u:\n", &key("db", 5432, "d", "u")), None);
    }

    #[test]
    fn default_socket_folders_are_localhost() {
        let file = "localhost:5432:d:u:local\n";
        assert_eq!(
            lookup(file, &key("/var/run/postgresql", 5432, "d", "u")),
            Some("local".to_owned())
        );
        assert_eq!(lookup(file, &key("/srv/sockets", 5432, "d", "u")), None);
        assert_eq!(
            lookup("/srv/sockets:5432:d:u:path\n", &key("/srv/sockets", 5432, "d", "u")),
            Some("path".to_owned())
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_file_others_can_read_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("headstart-pgpass-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("pgpass");
        std::fs::write(&path, "*:*:*:*:s3cret\n").expect("write");
        let key = key("h", 5432, "d", "u");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = read(&path, &key).expect_err("world-readable");
        assert!(err.contains("chmod 0600") && !err.contains("s3cret"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(read(&path, &key), Ok(Some("s3cret".to_owned())));
        assert_eq!(read(&dir.join("missing"), &key), Ok(None));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
