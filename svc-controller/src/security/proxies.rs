//! `trusted_proxies`: which TCP peers are reverse proxies whose `X-Forwarded-For` and
//! `X-Forwarded-Proto` are believed, and the client address that follows from them.
//!
//! Without trusted proxies (the default) the client is the TCP peer, whatever a request's
//! headers say: anyone can write `X-Forwarded-For`, and believing it would let a guesser
//! pick a fresh address for the login throttle with every attempt and write any address
//! into the audit log. When the peer is trusted, `X-Forwarded-For` is read from the right
//! (each proxy appends the address it received from) and the first address that is not
//! itself a trusted proxy is the client.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

/// One entry of `trusted_proxies`: an address, or a CIDR range (`10.0.0.0/8`,
/// `fd00::/8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRange(IpNet);

impl IpRange {
    /// Parses `ADDRESS` or `ADDRESS/PREFIX`. Bits set below the prefix are refused, so a
    /// typo such as `10.1.2.3/8` is not silently a different range.
    pub fn parse(text: &str) -> Result<IpRange, String> {
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address
            .parse()
            .map_err(|_| format!("{address:?} is not an IP address"))?;
        // An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, as a dual-stack listener
        // reports IPv4 peers) is the IPv4 address it is.
        let network = network.to_canonical();
        let bits: u8 = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(text) => {
                // Digits only, without a leading zero: `+8` and `08` are typos.
                let plain = !text.is_empty()
                    && text.bytes().all(|b| b.is_ascii_digit())
                    && (text == "0" || !text.starts_with('0'));
                match text.parse::<u8>() {
                    Ok(p) if plain && p <= bits => p,
                    _ => {
                        return Err(format!("{text:?} is not a prefix length from 0 to {bits}"));
                    }
                }
            }
        };
        let net = IpNet::new(network, prefix)
            .map_err(|_| format!("{prefix} is not a prefix length from 0 to {bits}"))?;
        if net.trunc() != net {
            return Err(format!(
                "{text} has bits set past its prefix (the range is {})",
                net.trunc()
            ));
        }
        Ok(IpRange(net))
    }

    /// True when `ip` is in the range (IPv4-mapped IPv6 counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&ip.to_canonical())
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The configured proxies; see the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    ranges: Vec<IpRange>,
}

/// At most this many `X-Forwarded-For` entries are looked at, from the right: a longer
/// chain than that is not a path through proxies anyone runs.
const MAX_HOPS: usize = 32;

impl TrustedProxies {
    /// The proxies of `trusted_proxies`.
    pub fn new(ranges: Vec<IpRange>) -> TrustedProxies {
        TrustedProxies { ranges }
    }

    /// True when `ip` is a trusted proxy.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.ranges.iter().any(|range| range.contains(ip))
    }

    /// The client of a request from `peer` whose `X-Forwarded-For` header lines are
    /// `forwarded_for` (in the order received): `peer` unless it is trusted; then the
    /// rightmost forwarded address that is not trusted. When an entry cannot be read the
    /// last address read before it stands (a trusted proxy wrote everything to its right;
    /// what is left of it anyone could have written), as when every entry is trusted.
    pub fn client<'a>(&self, peer: IpAddr, forwarded_for: impl Iterator<Item = &'a str>) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return peer;
        }
        let entries: Vec<&str> = forwarded_for.flat_map(|line| line.split(',')).collect();
        let mut client = peer;
        for entry in entries.iter().rev().take(MAX_HOPS) {
            let Some(ip) = parse_forwarded(entry) else {
                break;
            };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: an address, possibly with a port (`192.0.2.1:4711`,
/// `[2001:db8::1]:4711`) as some proxies write it.
fn parse_forwarded(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    if let Ok(socket) = entry.parse::<std::net::SocketAddr>() {
        return Some(socket.ip().to_canonical());
    }
    let bracketed = entry.strip_prefix('[')?.strip_suffix(']')?;
    bracketed.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect(text)
    }

    #[test]
    fn ranges_parse_addresses_and_cidrs() {
        let single = IpRange::parse("192.0.2.7").expect("address");
        assert!(single.contains(ip("192.0.2.7")));
        assert!(!single.contains(ip("192.0.2.8")));
        let net = IpRange::parse("10.0.0.0/8").expect("cidr");
        assert!(net.contains(ip("10.255.1.2")));
        assert!(net.contains(ip("::ffff:10.1.2.3")), "mapped IPv4");
        assert!(!net.contains(ip("11.0.0.1")));
        assert!(!net.contains(ip("::a00:1")), "another family");
        let v6 = IpRange::parse("fd00::/8").expect("v6 cidr");
        assert!(v6.contains(ip("fdab::1")));
        assert!(!v6.contains(ip("fe80::1")));
        let all = IpRange::parse("0.0.0.0/0").expect("everything");
        assert!(all.contains(ip("203.0.113.9")));
        assert_eq!(net.to_string(), "10.0.0.0/8");
        assert_eq!(
            IpRange::parse("::ffff:192.0.2.1").expect("mapped"),
            single_of("192.0.2.1")
        );
    }

    fn single_of(text: &str) -> IpRange {
        IpRange::parse(text).expect(text)
    }

    #[test]
    fn bad_ranges_are_refused_with_a_reason() {
        for (bad, says) in [
            ("proxy.example", "not an IP address"),
            ("10.0.0.0/33", "prefix length from 0 to 32"),
            ("fd00::/129", "prefix length from 0 to 128"),
            ("10.0.0.0/", "prefix length"),
            ("10.0.0.0/+8", "prefix length"),
            ("10.0.0.0/08", "prefix length"),
            ("10.1.2.3/8", "the range is 10.0.0.0/8"),
            ("", "not an IP address"),
        ] {
            let err = IpRange::parse(bad).expect_err(bad);
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn forwarded_for_is_believed_only_from_a_trusted_peer() {
        let proxies = TrustedProxies::new(vec![single_of("127.0.0.1"), single_of("10.0.0.0/8")]);
        let xff = ["198.51.100.1, 203.0.113.7", "10.1.1.1"];
        // An untrusted peer: its headers say nothing.
        assert_eq!(
            proxies.client(ip("192.0.2.50"), xff.into_iter()),
            ip("192.0.2.50")
        );
        // Trusted: the rightmost address that is not a proxy.
        assert_eq!(
            proxies.client(ip("127.0.0.1"), xff.into_iter()),
            ip("203.0.113.7")
        );
        assert_eq!(
            proxies.client(ip("::ffff:127.0.0.1"), xff.into_iter()),
            ip("203.0.113.7")
        );
        // No header: the peer.
        assert_eq!(
            proxies.client(ip("127.0.0.1"), std::iter::empty()),
            ip("127.0.0.1")
        );
        // Every entry trusted: the leftmost.
        assert_eq!(
            proxies.client(ip("127.0.0.1"), ["10.0.0.2, 10.0.0.3"].into_iter()),
            ip("10.0.0.2")
        );
        // Garbage stops the walk at the last address a trusted proxy wrote.
        assert_eq!(
            proxies.client(
                ip("127.0.0.1"),
                ["203.0.113.1, bogus, 10.0.0.3"].into_iter()
            ),
            ip("10.0.0.3")
        );
        // Ports and brackets as some proxies write them.
        assert_eq!(
            proxies.client(ip("127.0.0.1"), ["[2001:db8::5]:443"].into_iter()),
            ip("2001:db8::5")
        );
        assert_eq!(
            proxies.client(ip("127.0.0.1"), ["192.0.2.9:1234"].into_iter()),
            ip("192.0.2.9")
        );
        // Nothing trusted: never believed.
        let none = TrustedProxies::default();
        assert_eq!(
            none.client(ip("127.0.0.1"), xff.into_iter()),
            ip("127.0.0.1")
        );
        assert!(!none.trusts(ip("127.0.0.1")));
    }
}
