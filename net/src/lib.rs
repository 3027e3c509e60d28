//! Bytes on the wire and the running node (built in issue #4).
