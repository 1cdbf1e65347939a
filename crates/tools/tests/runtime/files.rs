//! The conversation's files through the runtime: each call gets its conversation's handle,
//! spilled data becomes a data file (`data_001`) named in the observation, and cached results
//! never cross conversations.

use super::*;
use ba_tools::{CallContext, ConversationFiles, DirFiles};

/// A runtime with `upload_text` (the text of an upload, idempotent) and `items` (n rows).
fn runtime() -> (ToolRuntime, Arc<MemorySink>) {
    let mut reg = ToolRegistry::new();
    #[derive(Deserialize, JsonSchema)]
    struct Ref {
        reference: String,
    }
    reg.register(
        typed_tool(
            "upload_text",
            "The text of a file of the conversation.",
            |a: Ref, ctx: CallContext| async move {
                let files = ctx
                    .files
                    .ok_or_else(|| ToolError::execution("no conversation files"))?;
                let found = files
                    .find(&a.reference)
                    .await
                    .map_err(|e| ToolError::invalid_parameters(e.to_string()))?
                    .ok_or_else(|| ToolError::invalid_parameters("no such file"))?;
                let path = files
                    .local_path(&found.id)
                    .await
                    .map_err(|e| ToolError::execution(e.to_string()))?;
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ToolError::execution(e.to_string()))?;
                Ok(json!({"id": found.id, "text": text}))
            },
        )
        .with_capabilities(ToolCapabilities::default().with_idempotent(true)),
    )
    .unwrap();
    reg.register(typed_tool(
        "items",
        "Lists n items.",
        |a: CountArgs, _| async move {
            Ok((0..a.n)
                .map(|i| json!({"id": i, "name": format!("item {i}")}))
                .collect::<Vec<_>>())
        },
    ))
    .unwrap();
    let sink = Arc::new(MemorySink::default());
    let runtime = ToolRuntime::new(reg, ToolsConfig::default())
        .unwrap()
        .with_jitter(Arc::new(NoJitter))
        .with_sink(sink.clone());
    (runtime, sink)
}

fn in_conversation(id: &str) -> InvocationContext {
    InvocationContext {
        conversation_id: Some(id.into()),
        ..InvocationContext::default()
    }
}

#[tokio::test]
async fn each_call_sees_its_own_conversations_files_and_the_cache_does_not_cross_them() {
    let (runtime, _) = runtime();
    let dir = tempfile::tempdir().unwrap();
    let a = DirFiles::new(dir.path().join("a"));
    let b = DirFiles::new(dir.path().join("b"));
    a.add_upload("sales.csv", b"region\nWest\n").await.unwrap();
    b.add_upload("sales.csv", b"region\nEast\n").await.unwrap();
    let a: Arc<dyn ConversationFiles> = Arc::new(a);
    let b: Arc<dyn ConversationFiles> = Arc::new(b);
    let opts = |files| CallOptions {
        files: Some(files),
        ..CallOptions::default()
    };
    let args = json!({"reference": "upload_001"});
    let in_a = runtime
        .run_with(
            &call("c1", "upload_text", args.clone()),
            &in_conversation("a"),
            opts(&a),
        )
        .await;
    let in_b = runtime
        .run_with(
            &call("c2", "upload_text", args.clone()),
            &in_conversation("b"),
            opts(&b),
        )
        .await;
    assert!(in_a.observation.contains("West"), "{}", in_a.observation);
    assert!(in_b.observation.contains("East"), "{}", in_b.observation);
    // Within one conversation the cache still answers.
    let again = runtime
        .run_with(
            &call("c3", "upload_text", args.clone()),
            &in_conversation("a"),
            opts(&a),
        )
        .await;
    assert!(again.observation.contains("West"), "{}", again.observation);
    assert_eq!(runtime.metrics().tool("upload_text").unwrap().cached, 1);
    // By original name too; without files the tool says so.
    let by_name = runtime
        .run_with(
            &call("c4", "upload_text", json!({"reference": "sales.csv"})),
            &in_conversation("b"),
            opts(&b),
        )
        .await;
    assert!(
        by_name.observation.contains("East"),
        "{}",
        by_name.observation
    );
    let none = runtime
        .run(&call("c5", "upload_text", args), &in_conversation("c"))
        .await;
    assert!(!none.success);
}

#[tokio::test]
async fn spilled_data_becomes_a_data_file_of_the_conversation() {
    let (runtime, sink) = runtime();
    let dir = tempfile::tempdir().unwrap();
    let files = DirFiles::new(dir.path());
    let handle: Arc<dyn ConversationFiles> = Arc::new(files.clone());
    let mut full = call("call_7", "items", json!({"n": 3}));
    full.output_level = Some(OutputLevel::Full);
    let opts = CallOptions {
        files: Some(&handle),
        ..CallOptions::default()
    };
    let r = runtime.run_with(&full, &in_conversation("a"), opts).await;
    assert!(r.success, "{}", r.observation);
    assert_eq!(r.data_ref.as_deref(), Some("data_001"));
    assert!(
        r.observation.starts_with("Data stored in file: data_001\n"),
        "{}",
        r.observation
    );
    assert!(!r.observation.contains(&dir.path().display().to_string()));
    assert!(
        sink.files.lock().unwrap().is_empty(),
        "the sink is not used"
    );
    let data = files.find("data_001").await.unwrap().unwrap();
    assert_eq!(data.kind, ba_tools::FileKind::Data);
    assert!(
        data.name.starts_with("call_7_") && data.name.ends_with(".json"),
        "{data:?}"
    );
    let bytes = std::fs::read(files.local_path("data_001").await.unwrap()).unwrap();
    let back: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back[2]["name"], "item 2");

    // A file the workspace refuses is a spill failure that still shows the preview.
    let small: Arc<dyn ConversationFiles> =
        Arc::new(DirFiles::new(dir.path().join("small")).with_max_file_bytes(10));
    let opts = CallOptions {
        files: Some(&small),
        ..CallOptions::default()
    };
    let r = runtime.run_with(&full, &in_conversation("a"), opts).await;
    assert!(!r.success);
    let err = r.error.unwrap();
    assert_eq!(err.code, "SPILL_FAILED");
    assert!(
        err.message.contains("over the limit of 10 bytes"),
        "{}",
        err.message
    );
    assert!(err.message.contains("item 0"), "{}", err.message);
}
