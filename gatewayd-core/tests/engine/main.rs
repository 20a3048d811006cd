//! The engine's tests, one binary: the attack suites (one module per family, each a real
//! attack shape that must be denied with its reason code), the benign suite (ordinary work,
//! zero false blocks) and the robustness suites (random and mutated inputs, no panic). Every
//! call goes through the real `Engine` on the fixture tree of `support`.
// The package's dependencies the engine's tests do not use.
use aho_corasick as _;
use base64 as _;
use brush_parser as _;
use flate2 as _;
use gateway_common as _;
use gix_index as _;
use glob as _;
use ignore as _;
use jsonschema as _;
use libc as _;
use regex as _;
use serde as _;
use sha2 as _;
use tar as _;
use thiserror as _;
use tokio as _;
use unicode_normalization as _;
use unicode_security as _;
use zip as _;

mod attacks_approvals;
mod attacks_arguments;
mod attacks_egress;
mod attacks_fail_closed;
mod attacks_registry;
mod attacks_sandbox;
mod attacks_secret_disguises;
mod attacks_shell;
mod benign;
mod corpora;
mod found_paths;
mod learn;
mod next_steps;
mod robustness;
mod support;
