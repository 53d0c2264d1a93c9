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
mod tests;
