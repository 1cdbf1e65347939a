//! Layer 4: permissions. A tool outside the active skill's `allowed_tools` (or the active
//! workflow node's `tools`), or above the
//! caller's permission level, is refused before it runs.

use ba_protocol::PermissionLevel;
use ba_protocol::{ContextModifier, ToolErrorCode};

use crate::error::ToolError;
use crate::tool::ToolCapabilities;

/// Checks that `tool` may run for a caller at `caller_level` under `modifier`.
pub fn check_permission(
    tool: &str,
    capabilities: ToolCapabilities,
    caller_level: PermissionLevel,
    modifier: Option<&ContextModifier>,
) -> Result<(), ToolError> {
    if let Some(modifier) = modifier
        && !capabilities.always_allowed
        && !modifier.allows(tool)
    {
        let allowed = modifier
            .allowed_tools
            .as_deref()
            .map(|t| t.join(", "))
            .unwrap_or_default();
        let allowed = if allowed.is_empty() {
            "none".to_owned()
        } else {
            allowed
        };
        return Err(ToolError::permission_denied(format!(
            "tool `{tool}` is not allowed while the active skill or workflow node restricts tools \
             (allowed: {allowed})"
        ))
        .with_code(ToolErrorCode::ToolNotAllowed));
    }
    if caller_level < capabilities.required_permission {
        return Err(ToolError::permission_denied(format!(
            "tool `{tool}` needs the `{}` permission level; this caller has `{}`",
            level_name(capabilities.required_permission),
            level_name(caller_level)
        ))
        .with_code(ToolErrorCode::PermissionLevel));
    }
    Ok(())
}

fn level_name(level: PermissionLevel) -> &'static str {
    match level {
        PermissionLevel::Restricted => "restricted",
        PermissionLevel::Default => "default",
        PermissionLevel::Admin => "admin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::ToolErrorKind;

    #[test]
    fn allowed_tools_and_levels_are_enforced() {
        let caps = ToolCapabilities::default();
        let modifier = ContextModifier {
            allowed_tools: Some(vec!["read".into(), "search".into()]),
            ..Default::default()
        };
        check_permission("read", caps, PermissionLevel::Default, Some(&modifier)).unwrap();
        check_permission("write", caps, PermissionLevel::Default, None).unwrap();
        let err =
            check_permission("write", caps, PermissionLevel::Admin, Some(&modifier)).unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::PermissionDenied);
        assert!(
            err.message.contains("allowed: read, search"),
            "{}",
            err.message
        );

        let admin = caps.with_required_permission(PermissionLevel::Admin);
        let err = check_permission("drop", admin, PermissionLevel::Default, None).unwrap_err();
        assert_eq!(
            err.message,
            "tool `drop` needs the `admin` permission level; this caller has `default`"
        );
        check_permission("drop", admin, PermissionLevel::Admin, None).unwrap();
        let ro = caps.with_required_permission(PermissionLevel::Default);
        assert!(check_permission("x", ro, PermissionLevel::Restricted, None).is_err());
    }
}
