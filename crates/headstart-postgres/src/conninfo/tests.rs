//! Tests of connection strings: parsing, defaults, redaction.

use super::*;

fn env() -> PgEnvironment {
    PgEnvironment {
        os_user: Some("osuser".to_owned()),
        ..PgEnvironment::default()
    }
}

#[test]
fn redaction_hides_url_passwords() {
    let cases = [
        (
            "postgresql://agent:s3cret@db:5432/agents",
            "postgresql://agent:***@db:5432/agents",
        ),
        (
            "POSTGRESQL://agent:s3cret@db/agents",
            "POSTGRESQL://agent:***@db/agents",
        ),
        ("postgres://agent@db/agents", "postgres://agent@db/agents"),
        (
            "postgres://db/agents?sslmode=require",
            "postgres://db/agents?sslmode=require",
        ),
        (
            "postgresql://agent@db/x?password=s3cret&sslmode=require",
            "postgresql://agent@db/x?password=***&sslmode=require",
        ),
        (
            "postgresql://db/x?Pass%77ord=s3cret",
            "postgresql://db/x?Pass%77ord=***",
        ),
        ("postgresql://a:p@ss@w/rd@db/x", "postgresql://a:***@db/x"),
        // An `@` in the query: more is hidden, never the password shown.
        (
            "postgresql://db/x?password=s3cret&application_name=a@b",
            "postgresql://db/x?password=***&application_name=a@b",
        ),
    ];
    for (conn, redacted) in cases {
        assert_eq!(redact(conn), redacted, "{conn}");
        assert!(!redact(conn).contains("s3cret"), "{conn}");
    }
}

#[test]
fn redaction_hides_key_value_passwords() {
    let cases = [
        ("host=db user=agent password=s3cret", "host=db user=agent password=***"),
        (
            "host=db password = 's3 cr\\'et' dbname=x",
            "host=db password=*** dbname=x",
        ),
        ("sslpassword=s3cret sslmode=require", "sslpassword=*** sslmode=require"),
        ("host='my db' user=a", "host='my db' user=a"),
        // A password with an unquoted space: its second word is hidden too.
        ("host=db password=s3 cret", "host=db password=*** ***"),
        ("host='db password=s3cret", "host=***"),
        ("", ""),
    ];
    for (conn, redacted) in cases {
        assert_eq!(redact(conn), redacted, "{conn}");
        assert!(!redact(conn).contains("s3") && !redact(conn).contains("cret"), "{conn}");
    }
}

#[test]
fn connection_strings_are_recognised() {
    for yes in [
        "postgres://h/db",
        "postgresql:///db?host=/tmp",
        "POSTGRESQL://u@h/db",
        "Postgres://h",
        "host=db dbname=x",
        "dbname = x",
        "user=a password='x y'",
    ] {
        assert!(is_connection_string(yes), "{yes}");
    }
    for no in [
        "runs.db",
        "postgres.db",
        "./a=b.db",
        "data/host.db",
        "postgres:/x",
        "=x",
        "",
    ] {
        assert!(!is_connection_string(no), "{no}");
    }
}

#[test]
fn libpq_parameters_are_taken_out_of_urls() {
    let target = parse(
        "POSTGRESQL://agent:pw@db.internal:6543/agents?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem\
         &application_name=w&passfile=/p",
        &env(),
    )
    .expect("parses");
    assert_eq!(target.tls.mode, SslMode::VerifyFull);
    assert_eq!(target.tls.root, Some(RootCerts::File(PathBuf::from("/etc/ca.pem"))));
    assert_eq!(target.passfile, Some(PathBuf::from("/p")));
    assert_eq!(target.config.get_application_name(), Some("w"));
    assert_eq!(target.config.get_password(), Some(&b"pw"[..]));
    assert_eq!(target.config.get_ssl_mode(), tokio_postgres::config::SslMode::Require);
    assert_eq!(
        target.pass_key,
        PassKey {
            host: "db.internal".to_owned(),
            port: 6543,
            dbname: "agents".to_owned(),
            user: "agent".to_owned()
        }
    );
    let target = parse("postgres://h/db?sslmode=verify-ca", &env()).expect("parses");
    assert_eq!(target.tls.mode, SslMode::VerifyCa);
    assert_eq!(target.config.get_user(), Some("osuser"), "the OS user by default");
}

#[test]
fn libpq_parameters_are_taken_out_of_key_value_strings() {
    let target = parse(
        "host=db.internal port=6543 dbname=agents user=agent password='a b\\'c' sslmode=require \
         sslrootcert='/etc/my ca.pem'",
        &env(),
    )
    .expect("parses");
    assert_eq!(target.tls.mode, SslMode::Require);
    assert_eq!(target.tls.root, Some(RootCerts::File(PathBuf::from("/etc/my ca.pem"))));
    assert_eq!(target.config.get_password(), Some(&b"a b'c"[..]));
    assert_eq!(target.config.get_dbname(), Some("agents"));
    assert_eq!(target.config.get_ports(), &[6543]);
}

#[test]
fn prefer_is_the_default_and_the_environment_fills_gaps() {
    let target = parse("postgresql://u@h/db", &env()).expect("parses");
    assert_eq!(
        target.tls,
        TlsSettings {
            mode: SslMode::Prefer,
            root: None
        }
    );
    assert_eq!(target.config.get_ssl_mode(), tokio_postgres::config::SslMode::Prefer);
    assert_eq!(target.config.get_password(), None);

    let env = PgEnvironment {
        password: Some("from-env".to_owned()),
        sslmode: Some("verify-ca".to_owned()),
        sslrootcert: Some("/ca.pem".to_owned()),
        home: Some(PathBuf::from("/home/u")),
        ..env()
    };
    let target = parse("postgresql://u@h/db", &env).expect("parses");
    assert_eq!(target.config.get_password(), Some(&b"from-env"[..]));
    assert_eq!(target.tls.mode, SslMode::VerifyCa);
    assert_eq!(target.passfile, Some(PathBuf::from("/home/u/.pgpass")));
    let target = parse("postgresql://u:given@h/db?sslmode=disable", &env).expect("parses");
    assert_eq!(target.config.get_password(), Some(&b"given"[..]), "the string wins");
    assert_eq!(target.tls.mode, SslMode::Disable);
}

#[test]
fn allow_starts_in_plain_text() {
    let target = parse("postgresql://h/db?sslmode=allow", &env()).expect("parses");
    assert_eq!(target.tls.mode, SslMode::Allow);
    assert_eq!(target.config.get_ssl_mode(), tokio_postgres::config::SslMode::Disable);
}

#[test]
fn system_roots_imply_verify_full() {
    let target = parse("host=h sslrootcert=system", &env()).expect("parses");
    assert_eq!(target.tls.mode, SslMode::VerifyFull);
    assert_eq!(target.tls.root, Some(RootCerts::System));
    let err = parse("host=h sslrootcert=system sslmode=require", &env()).expect_err("weak");
    assert!(err.contains("verify-full"), "{err}");
}

#[test]
fn unix_sockets_never_use_tls_and_addresses_name_the_host() {
    let target = parse("host=/run/postgresql sslmode=require", &env()).expect("parses");
    assert_eq!(target.config.get_ssl_mode(), tokio_postgres::config::SslMode::Disable);
    let target = parse("hostaddr=127.0.0.1 sslmode=verify-full", &env()).expect("parses");
    assert_eq!(target.config.get_hosts(), &[Host::Tcp("127.0.0.1".to_owned())]);
}

#[test]
fn bad_strings_are_refused_without_echoing_secrets() {
    for (conn, expected) in [
        ("host=h password=s3 cret", "follows the value of `password`"),
        ("host=h password='s3cret", "no closing quote"),
        ("postgresql://h/db?sslmode=verify", "invalid sslmode"),
        ("postgresql://u:s3cret@h:notaport/db", "port"),
        ("host=h sslcert=/c.pem password=s3cret", "sslcert"),
    ] {
        let err = parse(conn, &env()).expect_err(conn);
        assert!(err.contains(expected), "{conn}: {err}");
        assert!(!err.contains("s3") && !err.contains("cret"), "{conn}: {err}");
    }
}
