//! The hash-chained audit log. Not built yet.
