//! Authentication, authorization and the secrets they check against (docs/security.md).

pub mod acl;
pub mod authorizer;
pub mod credentials;
pub mod principal;
pub mod sasl;
pub mod tls;
