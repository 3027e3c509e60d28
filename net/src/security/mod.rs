//! Authentication and the secrets it checks against (docs/security.md).

pub mod credentials;
pub mod sasl;
