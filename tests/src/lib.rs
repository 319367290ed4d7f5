//! Shared harness for the black-box tests: start a real `laminar` broker process on a free
//! loopback port with a temporary data directory.
