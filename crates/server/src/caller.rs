//! Who a request comes from: the [`Caller`] the sign-in puts into every API request, and the
//! directory look-ups every mode but `token` shares.

use std::sync::Arc;

use ba_storage::{DEFAULT_OWNER, Directory, Role};

use crate::settings::UnknownUsers;
use crate::state::AppState;

/// Who a request comes from, as the sign-in established it: every API handler finds one in
/// the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The user's name (`owner` under `--auth token`).
    pub name: String,
    /// What the user may do.
    pub role: Role,
}

impl Caller {
    /// The single user of a token-guarded server: an admin named `owner`.
    pub fn owner() -> Self {
        Self {
            name: DEFAULT_OWNER.to_owned(),
            role: Role::Admin,
        }
    }

    /// Whether the caller may start work of their own (create, run, fork): viewers may not.
    pub(crate) fn may_work(&self) -> bool {
        self.role != Role::Viewer
    }
}

/// Why a request is refused at sign-in; the reason goes to the operator's log, never to the
/// client, whose answer is a bare 401.
pub(crate) struct Refused(pub(crate) String);

/// The store's directory of users, which every mode but `token` needs.
pub(crate) fn directory(state: &AppState) -> Result<Arc<dyn Directory>, Refused> {
    state
        .store()
        .directory()
        .ok_or_else(|| Refused("the store keeps no users (a file or PostgreSQL store does)".into()))
}

/// The directory's user `name`, made an analyst when unknown and the settings say so; a role
/// the identity provider vouches for (`claimed`) wins over the directory's.
pub(crate) async fn known_or_new(
    state: &AppState,
    name: &str,
    unknown: UnknownUsers,
    claimed: Option<Role>,
) -> Result<Caller, Refused> {
    let directory = directory(state)?;
    let known = directory
        .user(name)
        .await
        .map_err(|e| Refused(format!("the directory could not be read: {e}")))?;
    let user = match (known, unknown) {
        (Some(user), _) => user,
        (None, UnknownUsers::Refuse) => {
            return Err(Refused(format!("user {name:?} is not in the directory")));
        }
        (None, UnknownUsers::Create) => match directory.add_user(name, Role::Analyst).await {
            Ok(user) => {
                tracing::info!("user {name:?} signed in for the first time: added as an analyst");
                user
            }
            // Two first requests at once: the other one added the user.
            Err(first) => directory
                .user(name)
                .await
                .ok()
                .flatten()
                .ok_or_else(|| Refused(format!("user {name:?} could not be added: {first}")))?,
        },
    };
    Ok(Caller {
        name: user.name,
        role: claimed.unwrap_or(user.role),
    })
}
