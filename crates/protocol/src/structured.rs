//! structured
