//! Every variant of the protocol's named enums is written and read as its `as_str` name: the
//! log, the events and the HTTP API carry these names, and scripts match on them.

use ba_testkit::assert_wire_names;

use crate::{ApprovalMode, Decision, DropReason, HookEvent, LogRole, Mode, Role, ToolApproval};

#[test]
fn every_name_is_the_wire_name() {
    assert_wire_names(Role::as_str);
    assert_wire_names(LogRole::as_str);
    assert_wire_names(Mode::as_str);
    assert_wire_names(HookEvent::as_str);
    assert_wire_names(DropReason::as_str);
    assert_wire_names(Decision::as_str);
    assert_wire_names(ApprovalMode::as_str);
    assert_wire_names(ToolApproval::as_str);
}
