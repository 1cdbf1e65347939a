//! Response processing: code blocks saved to the conversation's workspace,
//! `<code_ref>` and `<file_ref>` tags turned into `{{CODE:n}}` / `{{FILE:n}}` placeholders with
//! their info lists, download links checked against the conversation's files, HTML detected,
//! and the API response assembled.

use ba_protocol::{
    Action, ActionType, ApiMetadata, ApiResponse, CodeRef, ContentType, FileRef, ResponseStatus,
    SavedCode, StructuredResponse, contains_html, replace_refs,
};
use ba_storage::ConversationId;
use ba_storage::{FileKind, Workspace};
use ba_storage::{get_code, save_code};

/// A processed final answer and what went wrong on the way (a reference to nothing, a
/// language replaced, a code block that could not be saved).
#[derive(Debug, Clone, PartialEq)]
pub struct Processed {
    /// The API response.
    pub response: ApiResponse,
    /// Problems, one sentence each.
    pub warnings: Vec<String>,
}

/// The files of one conversation: where a final answer's code is saved and its references are
/// resolved.
#[derive(Debug, Clone, Copy)]
pub struct Files<'a> {
    /// The workspace.
    pub workspace: &'a dyn Workspace,
    /// The conversation whose files they are.
    pub conversation: &'a ConversationId,
}

/// Processes a final answer: `structured` when the model answered in structured mode (its
/// `complete` action), otherwise the plain `text`. Code blocks are saved in `files`;
/// `<code_ref>`s name saved code, `<file_ref>`s and `download_links` name files of the
/// conversation (uploads, outputs, code, data — by id or by name); a name that matches
/// nothing is kept and reported in the warnings.
pub async fn process_final(
    text: &str,
    structured: Option<&StructuredResponse>,
    files: Option<Files<'_>>,
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
        let saved = save_blocks(blocks, files, &mut warnings).await;
        response.metadata.saved_codes.extend(saved);
    }
    let (with_code, code_ids) = replace_refs(&response.response, "code_ref", "CODE");
    let refs = code_refs(code_ids, files, &mut warnings).await;
    response.metadata.code_refs.extend(refs);
    let (with_files, file_ids) = replace_refs(&with_code, "file_ref", "FILE");
    let refs = file_refs(file_ids, files, &mut warnings).await;
    response.metadata.file_refs.extend(refs);
    let links = std::mem::take(&mut response.metadata.download_links);
    response.metadata.download_links = download_links(links, files, &mut warnings).await;
    response.response = with_files;
    Processed { response, warnings }
}

/// Saves a structured answer's code blocks in the conversation's workspace.
async fn save_blocks(
    blocks: &[ba_protocol::CodeBlock],
    files: Option<Files<'_>>,
    warnings: &mut Vec<String>,
) -> Vec<SavedCode> {
    let mut saved_codes = Vec::new();
    for block in blocks {
        let Some(files) = files else {
            warnings.push(format!(
                "code block `{}` was not saved: no workspace is configured",
                block.code_id
            ));
            continue;
        };
        match save_code(
            files.workspace,
            files.conversation,
            &block.code_id,
            &block.code,
            &block.language,
            &block.description,
        )
        .await
        {
            Ok(saved) => {
                warnings.extend(saved.warning);
                saved_codes.push(SavedCode {
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
    saved_codes
}

/// The `<code_ref>`s of an answer, in order, each looked up among the saved code.
async fn code_refs(
    code_ids: Vec<String>,
    files: Option<Files<'_>>,
    warnings: &mut Vec<String>,
) -> Vec<CodeRef> {
    let mut refs = Vec::with_capacity(code_ids.len());
    for (index, code_id) in code_ids.into_iter().enumerate() {
        let found = match files {
            Some(f) => f
                .workspace
                .meta(f.conversation, &code_id)
                .await
                .ok()
                .flatten()
                .filter(|m| m.kind == FileKind::Code),
            None => None,
        };
        let (language, description) = match found {
            Some(meta) => (
                meta.attributes
                    .get("language")
                    .cloned()
                    .unwrap_or_else(|| "unknown".to_owned()),
                meta.description,
            ),
            None => {
                warnings.push(format!(
                    "<code_ref>{code_id}</code_ref> names no saved code"
                ));
                (
                    "unknown".to_owned(),
                    "not found in the code store".to_owned(),
                )
            }
        };
        refs.push(CodeRef {
            code_id,
            language,
            description,
            index,
        });
    }
    refs
}

/// The `<file_ref>`s of an answer, in order, each looked up among the conversation's files
/// (by id or by name).
async fn file_refs(
    references: Vec<String>,
    files: Option<Files<'_>>,
    warnings: &mut Vec<String>,
) -> Vec<FileRef> {
    let mut refs = Vec::with_capacity(references.len());
    for (index, reference) in references.into_iter().enumerate() {
        let found = match files {
            Some(f) => f
                .workspace
                .find(f.conversation, &reference)
                .await
                .ok()
                .flatten(),
            None => None,
        };
        let (file_id, filename, file_type, size_bytes) = match found {
            Some(meta) => (
                meta.id.to_string(),
                meta.name.clone(),
                file_type(&meta.name),
                meta.size,
            ),
            None => {
                warnings.push(format!(
                    "<file_ref>{reference}</file_ref> names no file of this conversation"
                ));
                (reference, String::new(), "unknown".to_owned(), 0)
            }
        };
        refs.push(FileRef {
            file_id,
            filename,
            file_type,
            size_bytes,
            index,
        });
    }
    refs
}

/// The download links, each as the id of the file it names (a link that names nothing is
/// kept as it is, and reported).
async fn download_links(
    links: Vec<String>,
    files: Option<Files<'_>>,
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let mut out = Vec::with_capacity(links.len());
    for link in links {
        let found = match files {
            Some(f) => f.workspace.find(f.conversation, &link).await.ok().flatten(),
            None => None,
        };
        match found {
            // A link by name becomes the file's id, which the files route serves.
            Some(meta) => out.push(meta.id.to_string()),
            None => {
                warnings.push(format!(
                    "download link `{link}` names no file of this conversation"
                ));
                out.push(link);
            }
        }
    }
    out
}

/// The outputs of the conversation (files its tools wrote, such as the charts `run_python`
/// keeps) stored at or after `since` (an RFC 3339 time: the question the answer answers), by
/// id in the order they were written. A time that does not read gives none.
pub async fn outputs_since(files: Files<'_>, since: &str) -> Vec<String> {
    let Ok(at) = time::OffsetDateTime::parse(since, &time::format_description::well_known::Rfc3339)
    else {
        return Vec::new();
    };
    let since_ms = at.unix_timestamp_nanos() / 1_000_000;
    let Ok(mut listed) = files.workspace.list(files.conversation).await else {
        return Vec::new();
    };
    listed.retain(|m| m.kind == FileKind::Output && i128::from(m.created_ms) >= since_ms);
    listed.sort_by_key(|m| m.created_ms);
    listed.into_iter().map(|m| m.id.to_string()).collect()
}

/// The type shown for a file: its lowercased extension (`csv`, `png`), `markdown` for `.md`,
/// `file` without one.
fn file_type(name: &str) -> String {
    match name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()) {
        Some(e) if e == "md" => "markdown".to_owned(),
        Some(e) if !e.is_empty() && e.len() <= 10 => e,
        _ => "file".to_owned(),
    }
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

/// Expands `{{CODE:n}}` placeholders with the code saved in the conversation in fenced
/// blocks and `{{FILE:n}}` with the file's name, for a terminal that renders no widgets.
pub async fn render_for_terminal(response: &ApiResponse, files: Option<Files<'_>>) -> String {
    let mut out = response.response.clone();
    for r in &response.metadata.code_refs {
        let placeholder = format!("{{{{CODE:{}}}}}", r.index);
        let found = match files {
            Some(f) => get_code(f.workspace, f.conversation, &r.code_id).await.ok(),
            None => None,
        };
        let body = found
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
            vec![ba_protocol::CodeBlock {
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

    #[tokio::test]
    async fn code_is_saved_and_references_become_placeholders() {
        let dir = tempfile::tempdir().unwrap();
        let store = ba_storage::FileStore::open(dir.path()).unwrap();
        let (c1, c2) = (
            ConversationId::new("c1").unwrap(),
            ConversationId::new("c2").unwrap(),
        );
        for id in [&c1, &c2] {
            ba_storage::ConversationStore::create(&store, id, Default::default())
                .await
                .unwrap();
        }
        let workspace = ba_storage::ConversationStore::workspace(&store).unwrap();
        let files = |conversation| Files {
            workspace: workspace.as_ref(),
            conversation,
        };
        let s = complete(
            "See <code_ref>code_a</code_ref> and again <code_ref>code_a</code_ref>, \
             missing <code_ref>code_b</code_ref>.",
            Some(("code_a", "brainfuck")),
        );
        let out = process_final("", Some(&s), Some(files(&c1))).await;
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
        let shown = render_for_terminal(r, Some(files(&c1))).await;
        assert!(
            !render_for_terminal(r, Some(files(&c2)))
                .await
                .contains("print(1)"),
            "another conversation's code is not shown"
        );
        assert!(
            shown.contains("```python\nprint(1)\nprint(2)\n```"),
            "{shown}"
        );
    }

    #[tokio::test]
    async fn plain_answers_are_checked_for_html() {
        let out = process_final("<div id=chart></div>", None, None).await;
        assert!(out.response.metadata.contains_html);
        assert_eq!(out.response.metadata.content_type, ContentType::Html);
        let out = process_final("Sales grew 12 %.", None, None).await;
        assert!(!out.response.metadata.contains_html);
    }
}
