pub mod acl;
pub mod authorizer;
pub mod principal;
pub mod tls;
