//! Which files `read_file` refuses by their path, without touching the file system: secrets (unless the user
//! passed `--read-secrets`) and the files of this run's transcript. Names compare case-insensitively, since some
//! file systems do.
//!
//! Secrets:
//! - environment files: `.env`, `.env.*`, `*.env`;
//! - keys and certificates: `*.pem`, `*.key`, `*.p12`, `*.pfx`, `*.jks`, `*.keystore`, `*.ppk`, and SSH keys
//!   `id_rsa*`, `id_dsa*`, `id_ecdsa*`, `id_ed25519*`;
//! - credential files: `.netrc`, `_netrc`, `.pgpass`, `.git-credentials`, `.npmrc`, `.pypirc`, `.htpasswd`,
//!   `.dockercfg`, `credentials`, `credentials.*`;
//! - anything under a directory named `.ssh`, `.aws`, `.docker`, `.kube`, `.gnupg`, `.azure` or `gcloud`.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// Directories whose every file is a secret.
const SECRET_DIRECTORIES: &[&str] = &[".ssh", ".aws", ".docker", ".kube", ".gnupg", ".azure", "gcloud"];
/// File names that are secrets.
const SECRET_NAMES: &[&str] = &[
    ".netrc",
    "_netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".htpasswd",
    ".dockercfg",
    "credentials",
];
/// Beginnings of secret file names.
const SECRET_PREFIXES: &[&str] = &[".env.", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "credentials."];
/// Endings of secret file names (`.env` covers the file `.env` itself).
const SECRET_SUFFIXES: &[&str] = &[".env", ".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk"];

fn lowercase(name: &OsStr) -> String {
    name.to_string_lossy().to_lowercase()
}

/// The rule that makes `path` a secret (e.g. `*.pem`, `files under .ssh/`), or `None`.
pub fn secret_rule(path: &Path) -> Option<String> {
    let names: Vec<String> = path
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(lowercase(name)),
            _ => None,
        })
        .collect();
    let (file, directories) = names.split_last()?;
    if let Some(directory) = directories
        .iter()
        .find(|directory| SECRET_DIRECTORIES.contains(&directory.as_str()))
    {
        return Some(format!("files under {directory}/"));
    }
    if let Some(name) = SECRET_NAMES.iter().find(|name| file == *name) {
        return Some((*name).to_owned());
    }
    if let Some(prefix) = SECRET_PREFIXES.iter().find(|prefix| file.starts_with(*prefix)) {
        return Some(format!("{prefix}*"));
    }
    SECRET_SUFFIXES
        .iter()
        .find(|suffix| file.ends_with(*suffix))
        .map(|suffix| {
            if file == suffix {
                (*suffix).to_owned()
            } else {
                format!("*{suffix}")
            }
        })
}

/// The files SQLite keeps the database `db` in: the file itself and its `-wal`, `-shm` and `-journal` siblings.
pub fn transcript_files(db: &Path) -> Vec<PathBuf> {
    let mut files = vec![db.to_path_buf()];
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        files.push(PathBuf::from(name));
    }
    files
}

/// Whether the last component of `path` names one of the transcript's files (`db_name` is the database's file
/// name), in whatever directory: a second line of defence besides comparing the opened file with them.
pub fn is_transcript_name(path: &Path, db_name: &OsStr) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    let (name, db) = (lowercase(name), lowercase(db_name));
    name.strip_prefix(&db)
        .is_some_and(|rest| ["", "-wal", "-shm", "-journal"].contains(&rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_recognised_by_name_and_directory() {
        for (path, rule) in [
            (".env", ".env"),
            ("app/.env", ".env"),
            ("./.ENV", ".env"),
            (".env.local", ".env.*"),
            (".env.production", ".env.*"),
            ("prod.env", "*.env"),
            ("certs/server.pem", "*.pem"),
            ("tls/server.key", "*.key"),
            ("store.p12", "*.p12"),
            ("cert.pfx", "*.pfx"),
            ("release.jks", "*.jks"),
            ("android.keystore", "*.keystore"),
            ("putty.ppk", "*.ppk"),
            ("id_rsa", "id_rsa*"),
            ("keys/id_rsa.pub", "id_rsa*"),
            ("id_ed25519", "id_ed25519*"),
            ("id_ecdsa_sk", "id_ecdsa*"),
            ("id_dsa", "id_dsa*"),
            (".netrc", ".netrc"),
            ("_netrc", "_netrc"),
            (".pgpass", ".pgpass"),
            (".git-credentials", ".git-credentials"),
            (".npmrc", ".npmrc"),
            ("sub/.pypirc", ".pypirc"),
            (".htpasswd", ".htpasswd"),
            (".dockercfg", ".dockercfg"),
            ("credentials", "credentials"),
            ("credentials.json", "credentials.*"),
            (".aws/credentials", "files under .aws/"),
            (".aws/config", "files under .aws/"),
            (".docker/config.json", "files under .docker/"),
            ("home/.ssh/known_hosts", "files under .ssh/"),
            (".kube/config", "files under .kube/"),
            (".gnupg/pubring.kbx", "files under .gnupg/"),
            (".azure/msal_token_cache.json", "files under .azure/"),
            (
                ".config/gcloud/application_default_credentials.json",
                "files under gcloud/",
            ),
        ] {
            assert_eq!(secret_rule(Path::new(path)).as_deref(), Some(rule), "{path}");
        }
    }

    #[test]
    fn ordinary_files_are_not_secrets() {
        for path in [
            "README.md",
            "src/env.rs",
            "environment.txt",
            ".envrc.example.md",
            "docs/keys.md",
            "src/key.rs",
            "Cargo.toml",
            ".aws",
            "aws/credentials.md/x",
            "id.txt",
            "ssh/config",
            ".",
            "",
        ] {
            assert_eq!(secret_rule(Path::new(path)), None, "{path}");
        }
    }

    #[test]
    fn the_transcript_files_are_the_database_and_its_three_siblings() {
        let files = transcript_files(Path::new("runs/headstart.db"));
        assert_eq!(
            files,
            [
                "runs/headstart.db",
                "runs/headstart.db-wal",
                "runs/headstart.db-shm",
                "runs/headstart.db-journal"
            ]
            .map(PathBuf::from)
        );
        let db = OsStr::new("headstart.db");
        for path in [
            "headstart.db",
            "./headstart.db",
            "sub/../headstart.db",
            "HEADSTART.DB",
            "headstart.db-wal",
            "x/headstart.db-shm",
            "headstart.db-journal",
        ] {
            assert!(is_transcript_name(Path::new(path), db), "{path}");
        }
        for path in ["headstart.db.bak", "headstart.db-x", "other.db", "headstart", "."] {
            assert!(!is_transcript_name(Path::new(path), db), "{path}");
        }
    }
}
