//! `serve`: the HTTP API and the page over an agent, on the module's runtime (so in the
//! background of the Python program), until its handle is stopped.

use std::net::SocketAddr;
use std::sync::Mutex;

use ba_server::{AppState, Auth, ServerConfig, Token};
use pyo3::prelude::*;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::agent::Agent;
use crate::error::Error;
use crate::runtime;

/// What stops a server: the signal, and the task serving until it comes.
type Running = (oneshot::Sender<()>, JoinHandle<std::io::Result<()>>);

/// A running server.
#[pyclass(module = "ba_agent._native", frozen)]
pub(crate) struct Server {
    addr: SocketAddr,
    token: String,
    stop: Mutex<Option<Running>>,
}

#[pymethods]
impl Server {
    /// The address it listens on, as `host:port`.
    #[getter]
    fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// The bearer token of the API.
    #[getter]
    fn token(&self) -> String {
        self.token.clone()
    }

    /// Whether it still serves.
    #[getter]
    fn running(&self) -> bool {
        self.stop
            .lock()
            .map(|s| s.as_ref().is_some_and(|(_, h)| !h.is_finished()))
            .unwrap_or(false)
    }

    /// Stops the server: new runs are refused and runs in flight are given a few seconds
    /// before they are cancelled. Returns once it has stopped.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        Ok(py.detach(|| -> Result<(), Error> {
            let taken = self
                .stop
                .lock()
                .map_err(|_| Error::Argument("the server's handle was broken".into()))?
                .take();
            let Some((tx, handle)) = taken else {
                return Ok(());
            };
            let _ = tx.send(());
            match runtime::block_on(handle)? {
                Ok(served) => served.map_err(|e| Error::io("serving", e)),
                Err(e) => Err(Error::Argument(format!("the server failed: {e}"))),
            }
        })?)
    }
}

/// Starts serving `agent` on `addr` (`127.0.0.1:0` takes a free port); `token` is the API's
/// bearer token (a random one when `None`).
#[pyfunction]
#[pyo3(signature = (agent, addr = "127.0.0.1:8080", token = None))]
fn serve(py: Python<'_>, agent: &Agent, addr: &str, token: Option<&str>) -> PyResult<Server> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| Error::Argument(format!("`{addr}` is not an address (host:port): {e}")))?;
    let token = match token {
        Some(t) => Token::new(t).ok_or_else(|| {
            Error::Argument("the token must be a non-empty printable string".into())
        })?,
        None => Token::random(),
    };
    let agent = agent.inner.clone();
    Ok(py.detach(move || -> Result<Server, Error> {
        let rt = runtime::get()?;
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(addr))
            .map_err(|e| Error::io(format!("listening on {addr}"), e))?;
        let bound = listener
            .local_addr()
            .map_err(|e| Error::io("reading the address listened on", e))?;
        let state = AppState::new(agent, ServerConfig::new());
        let (tx, rx) = oneshot::channel::<()>();
        let shown = token.expose().to_owned();
        let handle = rt.spawn(ba_server::serve(
            listener,
            state,
            Auth::Token(token),
            async {
                let _ = rx.await;
            },
        ));
        Ok(Server {
            addr: bound,
            token: shown,
            stop: Mutex::new(Some((tx, handle))),
        })
    })?)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Server>()?;
    m.add_function(wrap_pyfunction!(serve, m)?)
}
