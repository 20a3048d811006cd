//! What gatewayd's tests share across crates: the fixture tree the engine suites, the
//! scenario files and the CLI tests run against, and the README's quickstart blocks. The test programs `gw-testagent` and
//! `gw-escape` are this crate's binaries.
pub mod export;
pub mod git;
pub mod net;
pub mod readme;
pub mod starter;
pub mod tree;

// The programs' dependency (gw-testagent, gw-escape); the library itself does not use it.
use libc as _;
