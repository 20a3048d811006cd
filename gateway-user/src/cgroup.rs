//! cgroup (in progress).
