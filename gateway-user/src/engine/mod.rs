//! The tool-call decision engine (issue 3). Not built yet.
