//! The errors of the package and the Python exceptions they become: `BaAgentError` is the base
//! of them all, with a subclass for each kind a caller may want to catch alone. The message is
//! the Rust error's sentence.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;

pyo3::create_exception!(
    ba_agent,
    BaAgentError,
    PyException,
    "What went wrong in ba_agent; the message says what."
);
pyo3::create_exception!(
    ba_agent,
    ConversationError,
    BaAgentError,
    "A conversation could not be read, converted or windowed."
);
pyo3::create_exception!(
    ba_agent,
    StoreError,
    BaAgentError,
    "The conversation store could not be opened, read or written."
);
pyo3::create_exception!(
    ba_agent,
    ConfigError,
    BaAgentError,
    "The agent's configuration is not one the package can run."
);
pyo3::create_exception!(
    ba_agent,
    RunError,
    BaAgentError,
    "The agent could not start or go on with a run."
);

/// An error of the package.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum Error {
    /// An argument that is not one of the values allowed.
    #[error("{0}")]
    Argument(String),
    /// A conversation that could not be read or converted.
    #[error("{0}")]
    Protocol(#[from] ba_protocol::ProtocolError),
    /// A window that could not be built.
    #[error("{0}")]
    Context(#[from] ba_context::ContextError),
    /// The store failed.
    #[error("{0}")]
    Storage(#[from] ba_storage::StorageError),
    /// A configuration the package cannot run.
    #[error("{0}")]
    Config(String),
    /// The model provider could not be set up.
    #[error("{0}")]
    Model(#[from] ba_model::ModelError),
    /// The agent refused or failed.
    #[error("{0}")]
    Agent(#[from] ba_agent::AgentError),
    /// The runtime or a socket failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// JSON handed over from the Python side that is not what it should be.
    #[error("{what} is not valid JSON: {source}")]
    Json {
        /// What was being read.
        what: String,
        /// Why it failed.
        source: serde_json::Error,
    },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn json(what: impl Into<String>, source: serde_json::Error) -> Self {
        Self::Json {
            what: what.into(),
            source,
        }
    }
}

impl From<Error> for PyErr {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        match e {
            Error::Argument(_) | Error::Json { .. } => {
                pyo3::exceptions::PyValueError::new_err(message)
            }
            Error::Protocol(_) | Error::Context(_) => ConversationError::new_err(message),
            Error::Storage(_) => StoreError::new_err(message),
            Error::Config(_) | Error::Model(_) => ConfigError::new_err(message),
            Error::Agent(_) => RunError::new_err(message),
            Error::Io { .. } => BaAgentError::new_err(message),
        }
    }
}

/// JSON text for Python, or the error naming what could not be written.
pub(crate) fn to_json<T: serde::Serialize + ?Sized>(
    what: &str,
    value: &T,
) -> Result<String, Error> {
    serde_json::to_string(value).map_err(|e| Error::json(what, e))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("BaAgentError", py.get_type::<BaAgentError>())?;
    m.add("ConversationError", py.get_type::<ConversationError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("RunError", py.get_type::<RunError>())?;
    Ok(())
}
