//! The `Host` check of the front: a listener on a loopback address answers only requests
//! addressed to it by an IP literal, `localhost` or a name listed in `allowed_hosts`.
//!
//! Why: a web page of any site can make the browser of someone on the same machine send
//! requests to `127.0.0.1`, and after a DNS rebinding the browser believes they go to the
//! page's own site and lets the page read the answers. Such requests carry the page's host
//! name, which is not allowed here. An IP literal cannot be rebound, so it always passes.
//! On other listeners the check applies only when `allowed_hosts` is set.

use std::net::IpAddr;

use axum::http::{HeaderValue, Uri};

use crate::config::MainConfig;

/// The host names a request may be addressed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHosts {
    /// Lower-cased, without port or final dot.
    names: Vec<String>,
}

impl AllowedHosts {
    /// The check of a service configured with `main`; `None` when there is none.
    pub fn from_main(main: &MainConfig) -> Option<AllowedHosts> {
        let listen_host = main
            .listen_address
            .rsplit_once(':')
            .map_or(main.listen_address.as_str(), |(host, _)| host);
        let loopback = listen_host.eq_ignore_ascii_case("localhost")
            || ip_literal(listen_host).is_some_and(|ip| ip.is_loopback());
        if !loopback && main.allowed_hosts.is_empty() {
            return None;
        }
        let mut names = main.allowed_hosts.clone();
        if loopback {
            names.push("localhost".to_string());
        }
        Some(AllowedHosts { names })
    }

    /// Whether a request with this `Host` header (or, without one, this URI's authority)
    /// may be answered. A request with neither carries no name to check.
    pub fn allows(&self, host: Option<&HeaderValue>, uri: &Uri) -> bool {
        let text = match host {
            Some(value) => match value.to_str() {
                Ok(text) => text,
                Err(_) => return false,
            },
            None => match uri.host() {
                Some(host) => host,
                None => return true,
            },
        };
        let name = host_without_port(text.trim());
        if ip_literal(name).is_some() {
            return true;
        }
        let name = name.trim_end_matches('.');
        self.names
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(name))
    }
}

/// `host[:port]` or `[v6][:port]` without the port (and without the brackets).
fn host_without_port(text: &str) -> &str {
    if let Some(rest) = text.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(host, _)| host);
    }
    match text.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => text,
    }
}

fn ip_literal(text: &str) -> Option<IpAddr> {
    text.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(names: &[&str]) -> AllowedHosts {
        AllowedHosts {
            names: names.iter().map(|n| n.to_string()).collect(),
        }
    }

    fn allows(hosts: &AllowedHosts, value: &str) -> bool {
        hosts.allows(
            Some(&HeaderValue::from_str(value).expect("value")),
            &Uri::from_static("/"),
        )
    }

    #[test]
    fn ip_literals_and_listed_names_pass_others_do_not() {
        let hosts = check(&["localhost", "svc.example.org"]);
        for ok in [
            "127.0.0.1:8080",
            "127.0.0.1",
            "[::1]:8080",
            "10.1.2.3",
            "localhost:31000",
            "LOCALHOST",
            "svc.example.org",
            "svc.example.org.:443",
        ] {
            assert!(allows(&hosts, ok), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:8080",
            "svc.example.org.evil.example",
            "localhost.evil.example",
            "",
        ] {
            assert!(!allows(&hosts, refused), "{refused}");
        }
        assert!(hosts.allows(None, &Uri::from_static("/svc/")));
        assert!(!hosts.allows(None, &Uri::from_static("http://evil.example/svc/")));
    }
}
