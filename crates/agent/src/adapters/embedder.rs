//! A model provider's embeddings as the context crate's embedder.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ba_context::{EmbedError, Embedder};
use ba_model::Embeddings;

/// Failures kept for [`ModelEmbedder::take_failures`] at most (the oldest go first).
const KEPT_FAILURES: usize = 16;

/// The context crate's [`Embedder`] over a model crate's [`Embeddings`] client (an
/// OpenAI-compatible `/embeddings` endpoint, say), for the `retrieval` strategy. When the
/// endpoint fails, the failure is logged as a warning, kept for
/// [`ModelEmbedder::take_failures`], and handed back: retrieval then ranks that compaction's
/// passages by BM25 alone, and the turn goes on. Clones share the kept failures.
#[derive(Debug, Clone)]
pub struct ModelEmbedder {
    inner: Arc<dyn Embeddings>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl ModelEmbedder {
    /// Vectors from `inner`.
    pub fn new(inner: Arc<dyn Embeddings>) -> Self {
        Self {
            inner,
            failures: Arc::default(),
        }
    }

    /// The failures since the last call, oldest first, each as its error reads.
    pub fn take_failures(&self) -> Vec<String> {
        std::mem::take(&mut *self.failures.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[async_trait]
impl Embedder for ModelEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self.inner.embed(texts).await {
            Ok(vectors) => Ok(vectors),
            Err(e) => {
                tracing::warn!(
                    texts = texts.len(),
                    error = %e,
                    "the embeddings endpoint failed; retrieval ranks by BM25 alone for this compaction"
                );
                let mut kept = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
                if kept.len() == KEPT_FAILURES {
                    kept.remove(0);
                }
                kept.push(e.to_string());
                Err(Box::new(e))
            }
        }
    }
}
