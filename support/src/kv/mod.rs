//! A key-value server over loopback TCP ([`server`]) and a load generator for it ([`load`]),
//! on a lock library picked at run time.

pub mod load;
pub mod server;
