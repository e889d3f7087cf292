//! anneal-tests: the harness for end-to-end tests across processes. Placeholder while it is written.
