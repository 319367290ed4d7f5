//! Laminar's fuzzing harness: structure-aware mutations of valid requests for every API and
//! version the broker advertises, fed to the request handlers in-process (no sockets) or to a
//! live broker over TCP. Figures: frames per API, crashes, hangs, peak RSS.

pub mod board;
pub mod inproc;
pub mod live;
pub mod mutate;
pub mod report;
pub mod seeds;
#[allow(unsafe_code)] // the shared board mapping, with its SAFETY comments
pub mod sys;
pub mod tokens;
pub mod waits;
