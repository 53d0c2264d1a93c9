//! What fetch_url may reach: address classes, the parser's normalised spellings, hosts, redirects.

use super::*;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn url(text: &str) -> Url {
    Url::parse(text).unwrap()
}

#[test]
fn every_non_public_class_is_recognised_in_both_families() {
    use AddressClass::*;
    for (address, class) in [
        ("127.0.0.1", Loopback),
        ("127.255.255.254", Loopback),
        ("::1", Loopback),
        ("10.0.0.1", Private),
        ("172.16.0.1", Private),
        ("172.31.255.255", Private),
        ("192.168.1.1", Private),
        ("fc00::1", Private),
        ("fd12:3456::1", Private),
        ("fec0::1", Private),
        ("169.254.169.254", LinkLocal),
        ("fe80::1", LinkLocal),
        ("febf::1", LinkLocal),
        ("100.64.0.1", SharedCgnat),
        ("100.127.255.255", SharedCgnat),
        ("224.0.0.1", Multicast),
        ("239.255.255.250", Multicast),
        ("ff02::1", Multicast),
        ("0.0.0.0", Unspecified),
        ("::", Unspecified),
        ("255.255.255.255", Broadcast),
        ("0.1.2.3", Reserved),
        ("192.0.0.8", Reserved),
        ("192.0.2.1", Reserved),
        ("198.18.0.1", Reserved),
        ("198.19.255.255", Reserved),
        ("198.51.100.1", Reserved),
        ("203.0.113.1", Reserved),
        ("240.0.0.1", Reserved),
        ("2001:db8::1", Reserved),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Reserved),
        ("100::1", Reserved),
        ("4000::1", Reserved),
        // IPv6 forms carrying an IPv4 address are judged by it.
        ("::ffff:127.0.0.1", Loopback),
        ("::ffff:7f00:1", Loopback),
        ("::127.0.0.1", Loopback),
        ("::ffff:10.1.2.3", Private),
        ("::ffff:169.254.169.254", LinkLocal),
        ("::ffff:100.64.0.1", SharedCgnat),
        ("::ffff:224.0.0.1", Multicast),
        ("::ffff:0.0.0.0", Unspecified),
        ("::ffff:255.255.255.255", Broadcast),
        ("64:ff9b::127.0.0.1", Loopback),
        ("64:ff9b::a9fe:a9fe", LinkLocal),
        ("2002:7f00:1::", Loopback),
        ("2002:c0a8:101::1", Private),
    ] {
        assert_eq!(classify(ip(address)), Some(class), "{address}");
    }
}

#[test]
fn public_addresses_pass() {
    for address in [
        "1.1.1.1",
        "8.8.8.8",
        "93.184.215.14",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "169.253.255.255",
        "198.17.255.255",
        "198.20.0.0",
        "223.255.255.255",
        "2606:4700:4700::1111",
        "2a00:1450:4001::200e",
        "::ffff:1.1.1.1",
        "64:ff9b::1.1.1.1",
        "2002:101:101::1",
    ] {
        assert_eq!(classify(ip(address)), None, "{address}");
    }
}

#[test]
fn the_url_parser_normalises_every_spelling_of_an_ipv4_address() {
    for spelled in [
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://0x7f.0.0.1/",
        "http://0x7f000001/",
        "http://017700000001/",
        "http://127.1/",
        "http://127.0.1/",
        "http://0x7F.0x00.0x00.0x01/",
    ] {
        assert_eq!(url(spelled).host(), Some(Host::Ipv4(Ipv4Addr::LOCALHOST)), "{spelled}");
    }
    assert_eq!(
        url("http://[::ffff:127.0.0.1]:8080/").host(),
        Some(Host::Ipv6("::ffff:7f00:1".parse().unwrap()))
    );
    assert_eq!(
        url("http://0xa9.0xfe.0xa9.0xfe/").host(),
        Some(Host::Ipv4(Ipv4Addr::new(169, 254, 169, 254)))
    );
}

#[test]
fn urls_are_refused_for_their_scheme_their_host_or_their_address() {
    let policy = FetchPolicy::default();
    for refused in [
        "http://2130706433:8080/secret",
        "http://0177.0.0.1/",
        "http://0x7f.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://10.0.0.1/",
        "http://100.100.100.200/",
        "http://0.0.0.0/",
        "https://[fd00::1]/",
    ] {
        let error = policy.check_url(&url(refused)).unwrap_err();
        assert!(matches!(error, Refused::Address { .. }), "{refused}: {error}");
        assert!(error.to_string().starts_with("refused: "), "{error}");
    }
    for scheme in [
        "file:///etc/passwd",
        "ftp://example.com/",
        "gopher://example.com/",
        "data:text/plain,x",
    ] {
        let error = policy.check_url(&url(scheme)).unwrap_err();
        assert!(matches!(error, Refused::Scheme(_)), "{scheme}: {error}");
    }
    assert_eq!(policy.check_url(&url("https://example.com/a?b")), Ok(()));
    assert_eq!(policy.check_url(&url("http://1.1.1.1/")), Ok(()));
    // Names are checked once resolved, by the address check.
    assert_eq!(policy.check_url(&url("http://localhost/")), Ok(()));
    assert!(policy.check_address("localhost", ip("127.0.0.1")).is_err());
    assert_eq!(
        policy.check_address("localhost", ip("::1")).unwrap_err().to_string(),
        "refused: localhost resolves to ::1, a loopback address; only public addresses are fetched"
    );
    assert_eq!(
        policy.check_url(&url("http://2130706433/")).unwrap_err().to_string(),
        "refused: 127.0.0.1 is a loopback address; only public addresses are fetched"
    );
    assert!(policy.check_address("example.com", ip("93.184.215.14")).is_ok());

    let private = FetchPolicy {
        allow_private: true,
        ..FetchPolicy::default()
    };
    assert_eq!(private.check_url(&url("http://127.0.0.1:9/")), Ok(()));
    assert_eq!(private.check_address("localhost", ip("::1")), Ok(()));
    assert!(matches!(private.check_url(&url("file:///x")), Err(Refused::Scheme(_))));
}

#[test]
fn allowed_hosts_are_compared_as_the_parser_spells_them() {
    let hosts: Vec<String> = ["Docs.RS", "2130706433", "[::1]"]
        .iter()
        .map(|host| normalize_host(host).unwrap())
        .collect();
    assert_eq!(hosts, ["docs.rs", "127.0.0.1", "[::1]"]);
    for bad in ["", "a/b", "user@host", "host:80", "http://x", "[::1"] {
        assert_eq!(normalize_host(bad), None, "{bad}");
    }
    let policy = FetchPolicy {
        allow_private: false,
        allowed_hosts: hosts,
    };
    assert_eq!(policy.check_url(&url("https://DOCS.rs/serde")), Ok(()));
    let error = policy.check_url(&url("https://docs.rs.evil.example/")).unwrap_err();
    assert!(matches!(error, Refused::HostNotAllowed { .. }), "{error}");
    assert!(matches!(
        policy.check_url(&url("https://crates.io/")),
        Err(Refused::HostNotAllowed { .. })
    ));
    // Allowing a host does not allow its non-public address.
    assert!(matches!(
        policy.check_url(&url("http://127.0.0.1/")),
        Err(Refused::Address { .. })
    ));
}

#[test]
fn redirects_stay_on_the_same_host_and_port_at_most_five_times() {
    let policy = FetchPolicy::default();
    let from = url("http://example.com/a");
    assert_eq!(policy.check_redirect(&from, &url("http://example.com/b"), 0), Ok(()));
    assert_eq!(policy.check_redirect(&from, &url("http://EXAMPLE.com:80/b"), 4), Ok(()));
    assert_eq!(policy.check_redirect(&from, &url("https://example.com/b"), 0), Ok(()));
    assert_eq!(
        policy.check_redirect(&from, &url("http://example.com/b"), MAX_REDIRECTS),
        Err(Refused::TooManyRedirects)
    );
    for other in [
        "http://example.org/",
        "http://sub.example.com/",
        "http://example.com:8080/",
        "https://example.com:8443/",
        "http://93.184.215.14/",
    ] {
        let error = policy.check_redirect(&from, &url(other), 0).unwrap_err();
        assert!(matches!(error, Refused::OtherOrigin { .. }), "{other}: {error}");
    }
    // Downgrading https to http is another origin too.
    assert!(policy
        .check_redirect(&url("https://example.com/"), &url("http://example.com/"), 0)
        .is_err());
    // A redirect to a non-public address or another scheme is refused as such, before the origin check.
    let error = policy
        .check_redirect(&from, &url("http://[::ffff:127.0.0.1]/"), 0)
        .unwrap_err();
    assert!(matches!(error, Refused::Address { .. }), "{error}");
    let error = policy.check_redirect(&from, &url("file:///etc/passwd"), 0).unwrap_err();
    assert!(matches!(error, Refused::Scheme(_)), "{error}");

    let private = FetchPolicy {
        allow_private: true,
        ..FetchPolicy::default()
    };
    let local = url("http://127.0.0.1:8000/a");
    assert_eq!(
        private.check_redirect(&local, &url("http://127.0.0.1:8000/b"), 1),
        Ok(())
    );
    assert!(matches!(
        private.check_redirect(&local, &url("http://127.0.0.1:8001/b"), 1),
        Err(Refused::OtherOrigin { .. })
    ));
    assert!(matches!(
        private.check_redirect(&local, &url("http://localhost:8000/b"), 1),
        Err(Refused::OtherOrigin { .. })
    ));
}
