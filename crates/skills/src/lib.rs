//! # ba-skills
//!
//! Agent Skills (SPEC §4): discovery of `SKILL.md` folders, progressive disclosure (L1
//! catalogue, L2 body, L3 resources), the activation stack and the `activate_skill` meta-tool.
//!
//! The crate is filled by its own issue; this release only reserves its place in the workspace.
#![deny(missing_docs)]
