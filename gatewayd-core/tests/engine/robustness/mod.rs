//! Robustness: random and mutated inputs for the audit chain, the engine, the policy loader,
//! shell lines and URLs, and tool input schemas. Each target asserts "no panic" (the
//! panicking input is reported) plus invariants that hold by construction.
mod audit;
mod engine;
mod input_schema;
mod inputs;
mod policy;
mod robustness_support;
mod shell_url;
