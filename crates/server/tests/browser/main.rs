#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! The page in a real browser: Debian's chromium driven through chromedriver (WebDriver) with
//! fantoccini. Skipped with a message when `BA_AGENT_TEST_WEBDRIVER` is unset (a failure under
//! CI=true); `.ci/browser.sh` installs and starts chromedriver. Screenshots go to
//! `target/browser-artifacts/`.

mod after_a_while;
mod approvals;
mod attachments;
mod branches;
mod budgets;
mod export;
mod files;
mod flows;
mod harness;
mod languages;
mod memory;
mod people;
mod proxy;
mod safety;
mod schedules;
mod stream;
mod tool_search;
mod turns;
mod workflows;
