//! Unit tests of the group state machine (in a later commit).
