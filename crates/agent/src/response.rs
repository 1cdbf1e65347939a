//! Response processing (O5, seed 003): code blocks saved to the code store, `<code_ref>` and
//! `<file_ref>` tags turned into `{{CODE:n}}` / `{{FILE:n}}` placeholders with their info
//! lists, HTML detected, and the API response (P11) assembled.

use ba_protocol::structured::{
    Action, ActionType, ApiMetadata, ApiResponse, CodeRef, ContentType, FileRef, ResponseStatus,
    SavedCode, StructuredResponse, contains_html, replace_refs,
};
use ba_storage::code::CodeStore;
use ba_storage::upload::UploadStore;

/// A processed final answer and what went wrong on the way (a reference to nothing, a
/// language replaced, a code block that could not be saved).
#[derive(Debug, Clone, PartialEq)]
pub struct Processed {
    /// The API response.
    pub response: ApiResponse,
    /// Problems, one sentence each.
    pub warnings: Vec<String>,
}

/// Where references are resolved and code is saved.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stores<'a> {
    /// The code store.
    pub code: Option<&'a CodeStore>,
    /// The upload store.
    pub uploads: Option<&'a UploadStore>,
    /// The conversation the code belongs to.
    pub conversation_id: Option<&'a str>,
}

/// Processes a final answer: `structured` when the model answered in structured mode (its
/// `complete` action), otherwise the plain `text`.
pub fn process_final(
    text: &str,
    structured: Option<&StructuredResponse>,
    stores: Stores<'_>,
) -> Processed {
    let mut warnings = Vec::new();
    let mut response = match structured {
        Some(s) => ApiResponse::from_structured(s),
        None => plain(text),
    };
    if let Some(StructuredResponse {
        action: Action::Complete {
            code_blocks: Some(blocks),
            ..
        },
        ..
    }) = structured
    {
        for block in blocks {
            let Some(store) = stores.code else {
                warnings.push(format!(
                    "code block `{}` was not saved: no code store is configured",
                    block.code_id
                ));
                continue;
            };
            match store.save(
                &block.code_id,
                &block.code,
                &block.language,
                &block.description,
                stores.conversation_id,
            ) {
                Ok(saved) => {
                    warnings.extend(saved.warning);
                    response.metadata.saved_codes.push(SavedCode {
                        code_id: saved.meta.code_id,
                        language: saved.meta.language,
                        description: saved.meta.description,
                        line_count: saved.meta.line_count,
                        char_count: saved.meta.char_count,
                    });
                }
                Err(err) => warnings.push(format!(
                    "code block `{}` was not saved: {err}",
                    block.code_id
                )),
            }
        }
    }
    let (with_code, code_ids) = replace_refs(&response.response, "code_ref", "CODE");
    for (index, code_id) in code_ids.into_iter().enumerate() {
        let found = stores
            .code
            .map(|s| s.meta(stores.conversation_id, &code_id));
        let (language, description) = match found {
            Some(Ok(meta)) => (meta.language, meta.description),
            _ => {
                warnings.push(format!(
                    "<code_ref>{code_id}</code_ref> names no saved code"
                ));
                (
                    "unknown".to_owned(),
                    "not found in the code store".to_owned(),
                )
            }
        };
        response.metadata.code_refs.push(CodeRef {
            code_id,
            language,
            description,
            index,
        });
    }
    let (with_files, file_ids) = replace_refs(&with_code, "file_ref", "FILE");
    for (index, file_id) in file_ids.into_iter().enumerate() {
        let found = stores.uploads.map(|s| s.meta(&file_id));
        let (filename, file_type, size_bytes) = match found {
            Some(Ok(meta)) => (meta.name, meta.file_type, meta.size),
            _ => {
                warnings.push(format!(
                    "<file_ref>{file_id}</file_ref> names no uploaded file"
                ));
                (String::new(), "unknown".to_owned(), 0)
            }
        };
        response.metadata.file_refs.push(FileRef {
            file_id,
            filename,
            file_type,
            size_bytes,
            index,
        });
    }
    response.response = with_files;
    Processed { response, warnings }
}

/// The API response of a plain-text final answer.
fn plain(text: &str) -> ApiResponse {
    let html = contains_html(text);
    ApiResponse {
        response: text.to_owned(),
        metadata: ApiMetadata {
            action_type: ActionType::Complete,
            status: ResponseStatus::Complete,
            tool_calls: Vec::new(),
            content_type: if html {
                ContentType::Html
            } else {
                ContentType::Markdown
            },
            contains_html: html,
            code_refs: Vec::new(),
            file_refs: Vec::new(),
            saved_codes: Vec::new(),
            recommended_questions: Vec::new(),
            download_links: Vec::new(),
            task_analysis: String::new(),
            execution_plan: String::new(),
            current_round: 0,
        },
    }
}

/// Expands `{{CODE:n}}` placeholders with the code saved in `conversation_id` in fenced
/// blocks and `{{FILE:n}}` with the file's name, for a terminal that renders no widgets.
pub fn render_for_terminal(
    response: &ApiResponse,
    code: Option<&CodeStore>,
    conversation_id: Option<&str>,
) -> String {
    let mut out = response.response.clone();
    for r in &response.metadata.code_refs {
        let placeholder = format!("{{{{CODE:{}}}}}", r.index);
        let body = code
            .and_then(|s| s.get(conversation_id, &r.code_id).ok())
            .map(|(meta, text)| {
                format!(
                    "[code {} ({}, {} lines): {}]\n```{}\n{}\n```",
                    meta.code_id,
                    meta.language,
                    meta.line_count,
                    meta.description,
                    meta.language,
                    text.trim_end()
                )
            })
            .unwrap_or_else(|| format!("[code {} not found]", r.code_id));
        out = out.replace(&placeholder, &body);
    }
    for r in &response.metadata.file_refs {
        let placeholder = format!("{{{{FILE:{}}}}}", r.index);
        out = out.replace(
            &placeholder,
            &format!(
                "[file {} ({}, {} bytes)]",
                r.filename, r.file_type, r.size_bytes
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(content: &str, code: Option<(&str, &str)>) -> StructuredResponse {
        let blocks = code.map(|(id, lang)| {
            vec![ba_protocol::structured::CodeBlock {
                code_id: id.into(),
                code: "print(1)\nprint(2)\n".into(),
                language: lang.into(),
                description: "prints".into(),
            }]
        });
        StructuredResponse {
            task_analysis: "t".into(),
            execution_plan: "R1".into(),
            current_round: 2,
            action: Action::Complete {
                content: content.into(),
                recommended_questions: Some(vec!["Next?".into()]),
                download_links: None,
                code_blocks: blocks,
            },
        }
    }

    #[test]
    fn code_is_saved_and_references_become_placeholders() {
        let dir = tempfile::tempdir().unwrap();
        let code = CodeStore::open(dir.path()).unwrap();
        let s = complete(
            "See <code_ref>code_a</code_ref> and again <code_ref>code_a</code_ref>, \
             missing <code_ref>code_b</code_ref>.",
            Some(("code_a", "brainfuck")),
        );
        let out = process_final(
            "",
            Some(&s),
            Stores {
                code: Some(&code),
                uploads: None,
                conversation_id: Some("c1"),
            },
        );
        let r = &out.response;
        assert_eq!(
            r.response,
            "See {{CODE:0}} and again {{CODE:0}}, missing {{CODE:1}}."
        );
        assert_eq!(r.metadata.saved_codes[0].language, "python");
        assert_eq!(r.metadata.saved_codes[0].line_count, 2);
        assert_eq!(r.metadata.code_refs[0].description, "prints");
        assert_eq!(r.metadata.code_refs[1].language, "unknown");
        assert_eq!(r.metadata.recommended_questions, vec!["Next?".to_owned()]);
        assert_eq!(out.warnings.len(), 2, "{:?}", out.warnings);
        assert!(out.warnings[0].contains("brainfuck"));
        assert!(out.warnings[1].contains("code_b"));
        let shown = render_for_terminal(r, Some(&code), Some("c1"));
        assert!(
            !render_for_terminal(r, Some(&code), Some("c2")).contains("print(1)"),
            "another conversation's code is not shown"
        );
        assert!(
            shown.contains("```python\nprint(1)\nprint(2)\n```"),
            "{shown}"
        );
    }

    #[test]
    fn plain_answers_are_checked_for_html() {
        let out = process_final("<div id=chart></div>", None, Stores::default());
        assert!(out.response.metadata.contains_html);
        assert_eq!(out.response.metadata.content_type, ContentType::Html);
        let out = process_final("Sales grew 12 %.", None, Stores::default());
        assert!(!out.response.metadata.contains_html);
    }
}
