//! The budget of webhook bodies in flight (`max_body_in_flight`): a body is read only once
//! its share is reserved, so that parallel uploads cannot drive memory up.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bytes of webhook bodies that may be received at once, all requests together: a body
/// is read only once its share is reserved (its `Content-Length`, or the route's limit
/// when it has none), so parallel uploads cannot drive memory up.
#[derive(Debug, Clone)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: u32,
}

impl BodyBudget {
    /// A budget of `total` bytes (at most 4 GiB).
    pub fn new(total: u64) -> BodyBudget {
        let total = u32::try_from(total).unwrap_or(u32::MAX);
        BodyBudget {
            bytes: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Reserves room for a body announced as `length` bytes (`None`: unknown, up to
    /// `limit`, the route's largest body); `None` when the budget has no room now.
    pub(super) fn reserve(
        &self,
        length: Option<u64>,
        limit: usize,
    ) -> Option<OwnedSemaphorePermit> {
        let limit = limit as u64;
        let wanted = length.unwrap_or(limit).clamp(1, limit);
        let wanted = u32::try_from(wanted).unwrap_or(u32::MAX).min(self.total);
        self.bytes.clone().try_acquire_many_owned(wanted).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_share_the_budget_and_an_unknown_length_takes_the_limit() {
        let budget = BodyBudget::new(100);
        let first = budget.reserve(Some(60), 1000).expect("room");
        assert!(budget.reserve(Some(50), 1000).is_none(), "only 40 left");
        let second = budget.reserve(Some(40), 1000).expect("room");
        drop(first);
        // A body without a length reserves the route's limit (here 50).
        let unknown = budget.reserve(None, 50).expect("room");
        assert!(budget.reserve(Some(11), 1000).is_none());
        drop((second, unknown));
        // A body announced larger than the whole budget reserves the whole budget.
        assert!(budget.reserve(Some(500), 1000).is_some());
    }
}
