//! [`SendHeadersLayer`] and its service, [`SendHeaders`]: the rate-limit headers an extractor
//! checked, added to the response its handler returns.

mod layer;
mod service;

pub use self::layer::SendHeadersLayer;
pub(crate) use self::service::HeaderSlot;
pub use self::service::SendHeaders;
