//! Layer `util`, the lowest: helpers with no knowledge of svc's domain. Uses nothing of
//! this crate outside itself.

pub mod fdlimit;
pub mod fsutil;
pub mod html;
pub mod lock;
pub mod space_reserve;
