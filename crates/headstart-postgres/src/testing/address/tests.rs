//! Tests of the test server's addresses.

use std::path::PathBuf;
use std::str::FromStr;

use tokio_postgres::config::Host;
use tokio_postgres::Config;

use super::{quote_ident, Address};

#[test]
fn urls_encode_socket_folders_and_credentials() {
    let address = Address {
        host: Host::Unix(PathBuf::from("/tmp/headstart pg/sockets")),
        port: 5432,
        user: "postgres".to_owned(),
        password: None,
    };
    let url = address.url("headstart_test_1_0");
    assert_eq!(
        url,
        "postgresql://postgres@%2Ftmp%2Fheadstart%20pg%2Fsockets:5432/headstart_test_1_0"
    );
    let config = Config::from_str(&url).expect("parses");
    assert_eq!(
        config.get_hosts(),
        &[Host::Unix(PathBuf::from("/tmp/headstart pg/sockets"))]
    );
    assert_eq!(config.get_dbname(), Some("headstart_test_1_0"));

    let address = Address {
        host: Host::Tcp("::1".to_owned()),
        port: 6543,
        user: "a@b".to_owned(),
        password: Some(b"p:w/d".to_vec()),
    };
    let config = Config::from_str(&address.url("db")).expect("parses");
    assert_eq!(config.get_user(), Some("a@b"));
    assert_eq!(config.get_password(), Some(&b"p:w/d"[..]));
    assert_eq!(config.get_ports(), &[6543]);
    assert_eq!(quote_ident("we\"ird"), "\"we\"\"ird\"");
}
