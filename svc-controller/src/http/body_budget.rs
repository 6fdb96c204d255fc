//! The budget of webhook bodies in flight (`max_body_in_flight`): bytes are charged as
//! they are received, against the whole budget and against the share of the client's
//! address, so that parallel uploads cannot drive memory up and no client can starve the
//! others.
//!
//! Charging what was received, not what a request announced, is what keeps a lying
//! client harmless: three connections that declare 21 MiB and send one byte each hold
//! three bytes. A client that does send its bytes slowly holds at most its address's
//! share ([`BodyBudget::per_client`]) for at most `http_body_timeout`; an IPv6 client
//! is known by its /64, the block one host is usually given, so that a host cannot
//! multiply its share by changing addresses.

use crate::util::lock::MutexExt as _;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use bytes::BytesMut;
use http_body_util::BodyExt as _;

use super::ApiError;

/// Bytes of webhook bodies that may be held at once, all requests together, and by the
/// requests of one client address; cheap to clone (one shared account).
#[derive(Debug, Clone)]
pub struct BodyBudget {
    account: Arc<Mutex<Account>>,
    total: u64,
    per_client: u64,
}

/// Who holds what.
#[derive(Debug, Default)]
struct Account {
    used: u64,
    /// Bytes held per client; a client holding nothing has no entry, so the map is
    /// bounded by the requests in flight.
    by_client: HashMap<ClientKey, u64>,
}

/// A client as the budget counts it: an IPv4 address, an IPv6 /64, or "unknown".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ClientKey {
    V4(u32),
    V6Net(u64),
    Unknown,
}

impl ClientKey {
    fn of(address: Option<IpAddr>) -> ClientKey {
        match address.map(|ip| ip.to_canonical()) {
            Some(IpAddr::V4(v4)) => ClientKey::V4(u32::from(v4)),
            Some(IpAddr::V6(v6)) => ClientKey::V6Net((u128::from(v6) >> 64) as u64),
            None => ClientKey::Unknown,
        }
    }
}

/// Why a charge was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The client's address holds its whole share.
    ClientShare,
    /// All requests together hold the whole budget.
    Total,
}

/// What one request holds of the budget; given back when dropped.
#[derive(Debug)]
pub struct BodyCharge {
    budget: BodyBudget,
    client: ClientKey,
    held: u64,
}

impl BodyBudget {
    /// A budget of `total` bytes. Each client address may hold a quarter of it, and at
    /// least one largest webhook body (`largest_body`, or the whole budget if smaller).
    pub fn new(total: u64, largest_body: u64) -> BodyBudget {
        let total = total.max(1);
        BodyBudget {
            account: Arc::new(Mutex::new(Account::default())),
            total,
            per_client: (total / 4).max(largest_body.min(total)),
        }
    }

    /// Most bytes one client address may hold at once.
    #[cfg(test)]
    pub fn per_client(&self) -> u64 {
        self.per_client
    }

    /// Bytes held now, all clients together.
    #[cfg(test)]
    pub fn used(&self) -> u64 {
        self.lock().used
    }

    fn lock(&self) -> MutexGuard<'_, Account> {
        // Every change is one complete update of two counters: still consistent after a
        // panic elsewhere.
        self.account.locked()
    }

    /// An empty charge for a request of the client at `address`.
    pub fn open(&self, address: Option<IpAddr>) -> BodyCharge {
        BodyCharge {
            budget: self.clone(),
            client: ClientKey::of(address),
            held: 0,
        }
    }
}

impl BodyCharge {
    /// Charges `bytes` more, or refuses (and charges nothing) when the client's share or
    /// the whole budget has no room for them.
    pub fn add(&mut self, bytes: u64) -> Result<(), Refused> {
        let budget = &self.budget;
        let mut account = budget.lock();
        let client_held = account.by_client.get(&self.client).copied().unwrap_or(0);
        if client_held.saturating_add(bytes) > budget.per_client {
            return Err(Refused::ClientShare);
        }
        if account.used.saturating_add(bytes) > budget.total {
            return Err(Refused::Total);
        }
        account.used += bytes;
        *account.by_client.entry(self.client).or_insert(0) += bytes;
        self.held += bytes;
        Ok(())
    }

    /// Bytes this request holds.
    #[cfg(test)]
    pub fn held(&self) -> u64 {
        self.held
    }
}

impl Drop for BodyCharge {
    fn drop(&mut self) {
        if self.held == 0 {
            return;
        }
        let mut account = self.budget.lock();
        account.used = account.used.saturating_sub(self.held);
        if let Some(held) = account.by_client.get_mut(&self.client) {
            *held = held.saturating_sub(self.held);
            if *held == 0 {
                account.by_client.remove(&self.client);
            }
        }
    }
}

/// Reads `body` whole, at most `limit` bytes, charging each piece to `charge` as it
/// arrives: 503 when the budget has no room (the client retries after `Retry-After`),
/// 413 past `limit`, 408 when the client stalls past the body timeouts, 400 for a body
/// that breaks off.
pub(super) async fn read_charged(
    body: Body,
    charge: &mut BodyCharge,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let mut body = body;
    let mut bytes = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(unreadable)?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers carry nothing a webhook uses
        };
        if bytes.len().saturating_add(data.len()) > limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body over {limit} bytes"),
            ));
        }
        if let Err(refused) = charge.add(data.len() as u64) {
            crate::metrics::webhook_rejected("body_budget");
            tracing::debug!(?refused, "webhook refused: max_body_in_flight is used up");
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                match refused {
                    Refused::ClientShare => {
                        "too many request bodies in flight from this address: retry later"
                    }
                    Refused::Total => "too many request bodies in flight: retry later",
                },
            ));
        }
        bytes.extend_from_slice(&data);
    }
    Ok(bytes.freeze())
}

/// The answer to a body that could not be read: 408 when the client did not send it
/// within the body timeouts, 413 past the route's limit, else 400.
fn unreadable(err: axum::Error) -> ApiError {
    if let Some(timed_out) = ApiError::body_timed_out(&err) {
        return timed_out;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(cause) = source {
        if cause.is::<http_body_util::LengthLimitError>() {
            return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
        }
        source = cause.source();
    }
    ApiError::bad_request("the request body could not be read")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(last: u8) -> Option<IpAddr> {
        Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)))
    }

    #[test]
    fn a_client_holds_at_most_its_share_and_all_at_most_the_total() {
        // Total 100, a quarter is 25, but one largest body (30) must fit.
        let budget = BodyBudget::new(100, 30);
        assert_eq!(budget.per_client(), 30);
        let mut first = budget.open(v4(1));
        first.add(20).expect("room");
        let mut second = budget.open(v4(1));
        assert_eq!(second.add(11), Err(Refused::ClientShare));
        second.add(10).expect("the share's last 10");
        // Other addresses are not held up by the first one's share.
        let mut others: Vec<BodyCharge> = (2..=3).map(|n| budget.open(v4(n))).collect();
        for other in &mut others {
            other.add(30).expect("room");
        }
        let mut fourth = budget.open(v4(4));
        assert_eq!(fourth.add(11), Err(Refused::Total), "90 of 100 held");
        fourth.add(10).expect("the last 10");
        assert_eq!(budget.used(), 100);
        drop((first, second, others, fourth));
        assert_eq!(budget.used(), 0);
        assert!(budget.lock().by_client.is_empty(), "no entry left behind");
    }

    #[test]
    fn an_ipv6_host_is_known_by_its_64_and_a_mapped_v4_as_v4() {
        let budget = BodyBudget::new(100, 10);
        let net = |low: u16| Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, low)));
        let mut a = budget.open(net(1));
        a.add(25).expect("room");
        assert_eq!(budget.open(net(2)).add(1), Err(Refused::ClientShare));
        let other_net = Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 3, 0, 0, 0, 1)));
        budget.open(other_net).add(25).expect("another /64");
        let mut plain = budget.open(v4(9));
        plain.add(20).expect("room");
        let mapped = Some(IpAddr::V6(Ipv4Addr::new(192, 0, 2, 9).to_ipv6_mapped()));
        assert_eq!(budget.open(mapped).add(6), Err(Refused::ClientShare));
    }

    #[tokio::test]
    async fn a_body_is_charged_as_it_arrives_and_given_back_after() {
        let budget = BodyBudget::new(100, 10);
        let mut charge = budget.open(v4(1));
        let body = Body::from_stream(futures_util::stream::iter([
            Ok::<_, std::io::Error>(Bytes::from_static(b"hello ")),
            Ok(Bytes::from_static(b"world")),
        ]));
        let read = read_charged(body, &mut charge, 1000).await.expect("read");
        assert_eq!(&read[..], b"hello world");
        assert_eq!(charge.held(), 11);
        drop(charge);
        assert_eq!(budget.used(), 0);

        let mut charge = budget.open(v4(1));
        let over = Body::from(vec![b'x'; 26]);
        let err = read_charged(over, &mut charge, 1000)
            .await
            .expect_err("full");
        assert_eq!(err.status, StatusCode::SERVICE_UNAVAILABLE);
        let err = read_charged(Body::from(vec![b'x'; 20]), &mut budget.open(v4(2)), 10)
            .await
            .expect_err("over the limit");
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
    }
}
