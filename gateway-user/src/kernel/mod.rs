//! Kernel layer (in progress).
