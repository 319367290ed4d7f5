//! Laminar's fuzzing harness: structure-aware mutations of valid requests for every API and
//! version the broker advertises, fed to the request handlers in-process (no sockets) or to a
//! live broker over TCP. Figures: frames per API, crashes, hangs, peak RSS.

#![forbid(unsafe_code)]
// The broker's request future, awaited whole on a shard here, nests deeper than the default.
#![recursion_limit = "256"]

pub mod board;
pub mod connection;
pub mod controller_port;
pub mod inproc;
pub mod live;
pub mod mutate;
pub mod report;
pub mod seeds;
pub mod tokens;
pub mod waits;
