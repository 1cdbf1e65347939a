//! Embeddings: texts turned into vectors, for retrieval. [`Embeddings`] is the trait (no HTTP);
//! [`OpenAiEmbeddings`] (feature `openai`) calls any OpenAI-compatible `POST {base}/embeddings`
//! endpoint: OpenAI's, vLLM's, llama.cpp's `llama-server --embeddings --pooling mean`.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

pub use super::error::EmbeddingProblem;
use super::error::ModelError;

/// Turns texts into vectors.
#[async_trait]
pub trait Embeddings: Send + Sync + fmt::Debug {
    /// One vector per text, in the texts' order, all of one dimension; none for no texts.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError>;
}

#[async_trait]
impl<T: Embeddings + ?Sized> Embeddings for Arc<T> {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).embed(texts).await
    }
}

fn _object_safe(_: &dyn Embeddings) {}

#[cfg(feature = "openai")]
pub use client::OpenAiEmbeddings;

#[cfg(feature = "openai")]
mod client {
    use std::time::Duration;

    use async_trait::async_trait;
    use serde::Deserialize;
    use serde_json::json;

    use super::{EmbeddingProblem, Embeddings};
    use crate::error::ModelError;
    use crate::http::{ApiKey, HttpConfig, Transport};
    use crate::retry::RetryPolicy;

    const PROVIDER: &str = "embeddings";

    /// A client of an OpenAI-compatible embeddings endpoint (`POST {base}/embeddings` with
    /// `{"model", "input": [..]}`, vectors read from `data[i].embedding` by `data[i].index`).
    ///
    /// Texts go in batches of [`OpenAiEmbeddings::DEFAULT_BATCH`] (see
    /// [`OpenAiEmbeddings::with_batch_size`]). Every answer is checked: one vector per text,
    /// every index once, one dimension throughout (across batches too), every number finite.
    /// Its defaults are tighter than a chat client's (a 30 s request, a minute in all, 16 MiB
    /// of answer, one retry): retrieval falls back to BM25 rather than wait.
    #[derive(Debug, Clone)]
    pub struct OpenAiEmbeddings {
        transport: Transport,
        key: Option<ApiKey>,
        url: String,
        model: String,
        batch: usize,
    }

    /// The answer's shape; fields other than these are ignored.
    #[derive(Deserialize)]
    struct Answer {
        data: Vec<Item>,
    }

    #[derive(Deserialize)]
    struct Item {
        index: Option<usize>,
        embedding: Vec<Option<f64>>,
    }

    impl OpenAiEmbeddings {
        /// Texts sent in one request at most, unless set.
        pub const DEFAULT_BATCH: usize = 32;

        /// A client of `{base_url}/embeddings` (a trailing `/` is ignored) asking for `model`,
        /// with `key` as a bearer token (`None` for a local server that wants none). Fails when
        /// `base_url` is not an `http` or `https` URL.
        pub fn new(
            base_url: &str,
            model: impl Into<String>,
            key: Option<ApiKey>,
        ) -> Result<Self, ModelError> {
            let base = base_url.trim_end_matches('/');
            let config = HttpConfig::default()
                .with_request_timeout(Duration::from_secs(30))
                .with_call_timeout(Duration::from_secs(60))
                .with_max_response_bytes(16 * 1024 * 1024)
                .with_retry(RetryPolicy::default().with_max_retries(1));
            Ok(Self {
                transport: Transport::new(PROVIDER, config, base)?,
                key,
                url: format!("{base}/embeddings"),
                model: model.into(),
                batch: Self::DEFAULT_BATCH,
            })
        }

        /// Sets the timeouts, the answer's size bound and the retries.
        pub fn with_http(mut self, config: HttpConfig) -> Self {
            self.transport.config = config;
            self
        }

        /// Gives a request `timeout`, and the whole call (a retry included) twice that.
        pub fn with_timeout(mut self, timeout: Duration) -> Self {
            self.transport.config = self
                .transport
                .config
                .with_request_timeout(timeout)
                .with_call_timeout(timeout * 2);
            self
        }

        /// Sends at most `n` texts a request (at least one).
        pub fn with_batch_size(mut self, n: usize) -> Self {
            self.batch = n.max(1);
            self
        }

        /// The texts sent in one request at most.
        pub fn batch_size(&self) -> usize {
            self.batch
        }

        /// The model asked for.
        pub fn model(&self) -> &str {
            &self.model
        }

        async fn embed_batch(
            &self,
            texts: &[String],
            dimension: &mut Option<usize>,
            offset: usize,
        ) -> Result<Vec<Vec<f32>>, ModelError> {
            let body = json!({"model": self.model, "input": texts});
            let (response, _, deadline, _) = self
                .transport
                .send_bearer(&self.url, self.key.as_ref(), &body)
                .await?;
            let answer: Answer = self
                .transport
                .body_json(response, deadline, "an embeddings answer")
                .await?;
            read(answer, texts.len(), dimension, offset).map_err(|problem| {
                ModelError::BadEmbeddings {
                    provider: PROVIDER.to_owned(),
                    problem,
                }
            })
        }
    }

    /// The vectors of `answer` in the order of the `n` texts sent; `offset` is the place of the
    /// batch's first text in the whole request (named in a problem), `dimension` the length
    /// every vector must have once one is known.
    fn read(
        answer: Answer,
        n: usize,
        dimension: &mut Option<usize>,
        offset: usize,
    ) -> Result<Vec<Vec<f32>>, EmbeddingProblem> {
        if answer.data.len() != n {
            return Err(EmbeddingProblem::Count {
                expected: n,
                found: answer.data.len(),
            });
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
        for (at, item) in answer.data.into_iter().enumerate() {
            // A server that leaves `index` out answers in order.
            let index = item.index.unwrap_or(at);
            if index >= n || out[index].is_some() {
                return Err(EmbeddingProblem::Index { index, texts: n });
            }
            let place = offset + index;
            if item.embedding.is_empty() {
                return Err(EmbeddingProblem::Empty { index: place });
            }
            let expected = *dimension.get_or_insert(item.embedding.len());
            if item.embedding.len() != expected {
                return Err(EmbeddingProblem::Dimension {
                    index: place,
                    expected,
                    found: item.embedding.len(),
                });
            }
            let mut vector = Vec::with_capacity(expected);
            for (position, x) in item.embedding.into_iter().enumerate() {
                let x = x.map(|x| x as f32).filter(|x| x.is_finite()).ok_or(
                    EmbeddingProblem::NonFinite {
                        index: place,
                        position,
                    },
                )?;
                vector.push(x);
            }
            out[index] = Some(vector);
        }
        // Every slot is filled: n items, each a distinct index below n.
        Ok(out.into_iter().flatten().collect())
    }

    #[async_trait]
    impl Embeddings for OpenAiEmbeddings {
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
            let mut out = Vec::with_capacity(texts.len());
            let mut dimension = None;
            for (k, batch) in texts.chunks(self.batch).enumerate() {
                out.extend(
                    self.embed_batch(batch, &mut dimension, k * self.batch)
                        .await?,
                );
            }
            Ok(out)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn answer(json: &str) -> Answer {
            serde_json::from_str(json).unwrap()
        }

        #[test]
        fn vectors_come_back_in_the_order_of_their_indexes() {
            let a = answer(
                r#"{"data": [{"index": 1, "embedding": [3, 4]}, {"index": 0, "embedding": [1, 2]}]}"#,
            );
            let v = read(a, 2, &mut None, 0).unwrap();
            assert_eq!(v, vec![vec![1.0, 2.0], vec![3.0, 4.0]]);
        }

        #[test]
        fn each_wrong_answer_is_named() {
            let cases = [
                (
                    r#"{"data": [{"index": 0, "embedding": [1]}]}"#,
                    EmbeddingProblem::Count {
                        expected: 2,
                        found: 1,
                    },
                ),
                (
                    r#"{"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [2]}]}"#,
                    EmbeddingProblem::Index { index: 0, texts: 2 },
                ),
                (
                    r#"{"data": [{"index": 0, "embedding": [1, 2]}, {"index": 1, "embedding": [2]}]}"#,
                    EmbeddingProblem::Dimension {
                        index: 11,
                        expected: 2,
                        found: 1,
                    },
                ),
                (
                    r#"{"data": [{"index": 0, "embedding": [1, 2]}, {"index": 1, "embedding": [2, 1e39]}]}"#,
                    EmbeddingProblem::NonFinite {
                        index: 11,
                        position: 1,
                    },
                ),
                (
                    r#"{"data": [{"index": 0, "embedding": [1, null]}, {"index": 1, "embedding": [2, 1]}]}"#,
                    EmbeddingProblem::NonFinite {
                        index: 10,
                        position: 1,
                    },
                ),
                (
                    r#"{"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": [2]}]}"#,
                    EmbeddingProblem::Empty { index: 10 },
                ),
            ];
            for (json, problem) in cases {
                assert_eq!(
                    read(answer(json), 2, &mut None, 10).unwrap_err(),
                    problem,
                    "{json}"
                );
            }
            // A later batch of another dimension than the first.
            let mut dimension = Some(3);
            assert_eq!(
                read(
                    answer(r#"{"data": [{"embedding": [1, 2]}]}"#),
                    1,
                    &mut dimension,
                    32
                )
                .unwrap_err(),
                EmbeddingProblem::Dimension {
                    index: 32,
                    expected: 3,
                    found: 2
                }
            );
        }
    }
}
