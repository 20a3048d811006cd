//! landlock (in progress).
