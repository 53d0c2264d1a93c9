//! What `fetch_url` may reach, decided without any I/O so that every case is a unit test: which addresses are
//! public, which URLs and hosts are allowed, which redirects are followed.
//!
//! The URL parser (`url`, WHATWG rules) normalises the other spellings of an IPv4 address (decimal `2130706433`,
//! octal `0177.0.0.1`, hex `0x7f.1`, short `127.1`) to the dotted form before anything here sees it; the tests
//! below check that it does. IPv6 forms that carry an IPv4 address (mapped `::ffff:a.b.c.d`, compatible
//! `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::`) are judged by the IPv4 address they carry.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// The most redirects one fetch follows; the next one is refused.
pub const MAX_REDIRECTS: usize = 5;

/// Why an address is not a public one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// 127.0.0.0/8, `::1`.
    Loopback,
    /// RFC 1918 (10/8, 172.16/12, 192.168/16), RFC 4193 unique local `fc00::/7`, deprecated site-local `fec0::/10`.
    Private,
    /// 169.254.0.0/16 (where cloud metadata services live), `fe80::/10`.
    LinkLocal,
    /// 100.64.0.0/10, shared by carrier-grade NAT (RFC 6598).
    SharedCgnat,
    /// 224.0.0.0/4, `ff00::/8`.
    Multicast,
    /// 0.0.0.0, `::` (connecting to it reaches the local machine).
    Unspecified,
    /// 255.255.255.255.
    Broadcast,
    /// Anything else that is not public unicast: 0.0.0.0/8, 192.0.0.0/24, the documentation and benchmarking
    /// ranges, 240.0.0.0/4, and IPv6 outside `2000::/3` or in its documentation, discard and Teredo prefixes.
    Reserved,
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::LinkLocal => "link-local",
            AddressClass::SharedCgnat => "shared (carrier-grade NAT)",
            AddressClass::Multicast => "multicast",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Reserved => "reserved",
        })
    }
}

/// What is wrong with `ip`, or `None` for a public unicast address.
pub fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, c, _] = ip.octets();
    Some(if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_private() {
        AddressClass::Private
    } else if ip.is_link_local() {
        AddressClass::LinkLocal
    } else if a == 100 && b & 0xc0 == 64 {
        AddressClass::SharedCgnat
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if ip.is_broadcast() {
        AddressClass::Broadcast
    } else if a == 0 || a >= 240 || (a, b, c) == (192, 0, 0) || (a == 198 && b & 0xfe == 18) || ip.is_documentation() {
        AddressClass::Reserved
    } else {
        return None;
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    if ip.is_unspecified() {
        return Some(AddressClass::Unspecified);
    }
    if ip.is_loopback() {
        return Some(AddressClass::Loopback);
    }
    if let Some(v4) = carried_v4(ip) {
        return classify_v4(v4);
    }
    let s = ip.segments();
    Some(if s[0] & 0xfe00 == 0xfc00 || s[0] & 0xffc0 == 0xfec0 {
        AddressClass::Private
    } else if s[0] & 0xffc0 == 0xfe80 {
        AddressClass::LinkLocal
    } else if s[0] & 0xff00 == 0xff00 {
        AddressClass::Multicast
    } else if s[0] & 0xe000 != 0x2000 || (s[0], s[1]) == (0x2001, 0x0db8) || (s[0], s[1]) == (0x2001, 0) {
        // Outside global unicast, documentation, or Teredo (whose embedded addresses are obfuscated).
        AddressClass::Reserved
    } else {
        return None;
    })
}

/// The IPv4 address an IPv6 address stands for, when it carries one.
fn carried_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |high: u16, low: u16| Some(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low)));
    match s {
        // IPv4-mapped ::ffff:a.b.c.d and the deprecated IPv4-compatible ::a.b.c.d.
        [0, 0, 0, 0, 0, 0xffff | 0, high, low] => v4(high, low),
        // NAT64, the well-known prefix (RFC 6052): a gateway forwards it to the IPv4 address.
        [0x64, 0xff9b, 0, 0, 0, 0, high, low] => v4(high, low),
        // 6to4 (RFC 3056): 2002:AABB:CCDD::/48.
        [0x2002, high, low, ..] => v4(high, low),
        _ => None,
    }
}

/// Why `fetch_url` does not fetch a URL. Every message starts with "refused".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not `http` or `https`.
    #[error("refused: only http and https URLs are fetched, not {0}:")]
    Scheme(String),
    /// No host to connect to.
    #[error("refused: the URL has no host")]
    NoHost,
    /// `--fetch-allow` names other hosts.
    #[error("refused: {host} is not among the hosts the user allowed ({allowed})")]
    HostNotAllowed {
        /// The URL's host.
        host: String,
        /// The allowed hosts, comma-separated.
        allowed: String,
    },
    /// The host is, or resolves only to, a non-public address.
    #[error("refused: {}; only public addresses are fetched", address_text(.host, .ip, .class))]
    Address {
        /// The URL's host.
        host: String,
        /// The address.
        ip: IpAddr,
        /// Why it is not public.
        class: AddressClass,
    },
    /// The name resolved to no address at all.
    #[error("refused: {0} has no address")]
    NoAddress(String),
    /// A redirect to another host, port or scheme.
    #[error("refused: a redirect to {to}; only redirects within {from} are followed")]
    OtherOrigin {
        /// Where the redirect led from (scheme, host and port).
        from: String,
        /// Where it led.
        to: String,
    },
    /// The sixth redirect.
    #[error("refused: more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
}

/// `HOST is a CLASS address`, or `HOST resolves to IP, a CLASS address` for a name.
fn address_text(host: &str, ip: &IpAddr, class: &AddressClass) -> String {
    if host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .ok()
        == Some(*ip)
    {
        format!("{host} is a {class} address")
    } else {
        format!("{host} resolves to {ip}, a {class} address")
    }
}

/// What `fetch_url` may reach (the URL check and the address check, applied to every hop).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchPolicy {
    /// Non-public addresses too (`--fetch-allow-private`).
    pub allow_private: bool,
    /// Only these hosts, as the URL parser spells them (`--fetch-allow`); empty: any host.
    pub allowed_hosts: Vec<String>,
}

/// `host` (a name, an IPv4 address in any spelling, or a bracketed IPv6 address) as the URL parser spells it, so
/// that `--fetch-allow` values compare with URLs' hosts; `None` when it is not a host.
pub fn normalize_host(host: &str) -> Option<String> {
    if host.is_empty() || (host.contains(['/', '?', '#', '@', ':']) && !host.starts_with('[')) {
        return None;
    }
    let url = Url::parse(&format!("http://{host}/")).ok()?;
    if url.port().is_some() || url.path() != "/" || url.query().is_some() {
        return None;
    }
    url.host_str().map(str::to_owned)
}

impl FetchPolicy {
    /// Checks a URL before any connection: its scheme, its host against `--fetch-allow`, and an address written in
    /// it (a host name's addresses are checked by [`FetchPolicy::check_address`] once resolved).
    pub fn check_url(&self, url: &Url) -> Result<(), Refused> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refused::Scheme(url.scheme().to_owned()));
        }
        let host = url.host().ok_or(Refused::NoHost)?;
        let spelled = url.host_str().unwrap_or_default();
        if !self.allowed_hosts.is_empty() && !self.allowed_hosts.iter().any(|allowed| allowed == spelled) {
            return Err(Refused::HostNotAllowed {
                host: spelled.to_owned(),
                allowed: self.allowed_hosts.join(", "),
            });
        }
        match host {
            Host::Ipv4(ip) => self.check_address(spelled, IpAddr::V4(ip)),
            Host::Ipv6(ip) => self.check_address(spelled, IpAddr::V6(ip)),
            Host::Domain(_) => Ok(()),
        }
    }

    /// Checks one address `host` stands for.
    pub fn check_address(&self, host: &str, ip: IpAddr) -> Result<(), Refused> {
        match classify(ip) {
            Some(class) if !self.allow_private => Err(Refused::Address {
                host: host.to_owned(),
                ip,
                class,
            }),
            _ => Ok(()),
        }
    }

    /// Checks the redirect from `from` to `to` after `followed` redirects: at most [`MAX_REDIRECTS`], to the same
    /// host and port (or from `http` to `https` on the default ports), and `to` must pass [`FetchPolicy::check_url`].
    pub fn check_redirect(&self, from: &Url, to: &Url, followed: usize) -> Result<(), Refused> {
        if followed >= MAX_REDIRECTS {
            return Err(Refused::TooManyRedirects);
        }
        self.check_url(to)?;
        let same_port = from.scheme() == to.scheme() && from.port_or_known_default() == to.port_or_known_default();
        let upgrade = from.scheme() == "http" && to.scheme() == "https" && from.port().is_none() && to.port().is_none();
        if from.host_str() == to.host_str() && (same_port || upgrade) {
            Ok(())
        } else {
            Err(Refused::OtherOrigin {
                from: from.origin().ascii_serialization(),
                to: to.to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
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
}
