pub mod acl;
pub mod principal;
