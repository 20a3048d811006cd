//! supervisor (in progress).
