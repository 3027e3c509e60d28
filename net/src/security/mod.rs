pub mod principal;
