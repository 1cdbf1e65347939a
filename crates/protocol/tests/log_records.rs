//! The loop's records as typed fields of the log schema: version 1's JSON reads into them and
//! is written back in the same shape; what does not fit its type is kept as written.

use ba_protocol::{EntryKind, LogEntry, WindowItem};
use serde_json::{Value, json};

/// Every record version 1 wrote, on the entries it wrote them on.
fn version_1_lines() -> Vec<Value> {
    vec![
        json!({"schema_version":1,"id":"u1","role":"user","created_at":"t","content":"Q3 sales by region","mode":"agent","request_id":"req-1","caller_run_id":"run-1"}),
        json!({"schema_version":1,"id":"s1","role":"system","created_at":"t","content":"Tool servers: files (ready: 1 tool)","include_in_context":false,"kind":"server_inventory","server_inventory":{"servers":[{"name":"files","state":"ready","tools":["files__read"]}]}}),
        json!({"schema_version":1,"id":"a1","role":"assistant","created_at":"t","content":"Reading.","tool_calls":[{"id":"c1","type":"function","function":{"name":"query_database","arguments":"{}"}}],"round":1,"stop_reason":"tool_use","retries":2,"usage":{"input_tokens":900,"output_tokens":40,"cache_read_tokens":800,"cache_write_tokens":0},"model":{"provider":"anthropic","name":"claude-x"},"context":{"compressed":true,"tokens_before":5000,"tokens_after":1200,"system_tokens":300,"used":1500,"strategies":["key-messages"],"dropped":3,"skills_reinjected":["sales-report"]},"problems":["tool input cut at max_tokens"]}),
        json!({"schema_version":1,"id":"t1","role":"tool","created_at":"t","content":"ok","tool_call_id":"c1","tool_name":"query_database","data_ref":"data_001","retry_count":1,"error_kind":"timeout","skill":{"name":"sales-report","activation_id":"act_1","allowed_tools":["file_reader"],"model":null}}),
        json!({"schema_version":1,"id":"u2","role":"user","created_at":"t","content":"continue","kind":"continue"}),
        json!({"schema_version":1,"id":"a2","role":"assistant","created_at":"t","content":"Done.","round":2,"api_response":{"response":"Done.","metadata":{"action_type":"complete","status":"complete"}},"warnings":["a code block had no language"]}),
    ]
}

#[test]
fn version_1_records_read_into_their_fields_and_write_back_in_the_same_shape() {
    for line in version_1_lines() {
        let entry = LogEntry::from_json(&line.to_string()).unwrap();
        assert!(
            entry.extra.is_empty(),
            "{}: a record stayed untyped: {:?}",
            entry.id,
            entry.extra
        );
        let mut written = serde_json::to_value(&entry).unwrap();
        written["schema_version"] = json!(1);
        let mut expected = line.clone();
        // `api_response` fills its defaults; compare the rest exactly.
        if let Some(api) = written.get("api_response").cloned() {
            assert_eq!(api["response"], "Done.");
            expected["api_response"] = api;
        }
        assert_eq!(written, expected, "{} changed shape", entry.id);
    }
    let entries: Vec<LogEntry> = version_1_lines()
        .iter()
        .map(|l| LogEntry::from_json(&l.to_string()).unwrap())
        .collect();
    let r = &entries[2].records;
    assert_eq!(r.round, Some(1));
    assert_eq!(r.retries, Some(2));
    assert_eq!(r.usage.unwrap().cache_read_tokens, 800);
    assert_eq!(
        r.context.as_ref().unwrap().skills_reinjected,
        ["sales-report"]
    );
    assert_eq!(r.model.as_ref().unwrap().name.as_deref(), Some("claude-x"));
    let t = &entries[3].records;
    assert_eq!(t.data_ref.as_deref(), Some("data_001"));
    assert_eq!(t.tool_retries, Some(1));
    assert_eq!(
        t.skill.as_ref().unwrap().allowed_tools.as_deref(),
        Some(&["file_reader".to_owned()][..])
    );
    assert_eq!(entries[0].records.caller_run_id.as_deref(), Some("run-1"));
    assert_eq!(entries[1].kind(), Some(EntryKind::ServerInventory));
    assert_eq!(entries[4].kind(), Some(EntryKind::Continue));
    assert_eq!(entries[0].kind(), None);
}

#[test]
fn a_version_1_compact_boundary_is_migrated_to_a_compaction_record() {
    let line = r#"{"schema_version":1,"id":"b1","role":"system","created_at":"t","content":"CONVERSATION_SUMMARY\nQ3 West","mode":"chat","kind":"compact_boundary"}"#;
    let e = LogEntry::from_json(line).unwrap();
    assert_eq!(e.kind(), Some(EntryKind::Compaction));
    assert!(!e.include_in_context);
    let record = e.records.compaction.as_ref().unwrap();
    assert!(record.starts_afresh());
    assert_eq!(record.strategies, ["compact"]);
    let [WindowItem::Entry { entry: summary }] = &record.items[..] else {
        panic!("{:?}", record.items);
    };
    assert_eq!(summary.text(), "CONVERSATION_SUMMARY\nQ3 West");
    assert!(summary.include_in_context);
    // Written back, it is a version-2 record, and reads back the same.
    let again = LogEntry::from_json(&serde_json::to_string(&e).unwrap()).unwrap();
    assert_eq!(again, e);
    assert_eq!(serde_json::to_value(&again).unwrap()["kind"], "compaction");
}

#[test]
fn what_does_not_fit_a_record_is_kept_as_written_and_the_entry_still_loads() {
    let line = json!({"schema_version":2,"id":"a1","role":"assistant","created_at":"t","content":"x",
        "round":"three","usage":[1,2],"kind":"a_later_kind","later_field":{"a":1},"skill":{"name":"s","activation_id":"a","allowed_tools":null,"model":null}});
    let e = LogEntry::from_json(&line.to_string()).unwrap();
    assert_eq!(e.records.round, None);
    assert_eq!(e.records.usage, None);
    assert_eq!(e.records.skill.as_ref().unwrap().name, "s");
    assert_eq!(e.kind(), Some(EntryKind::Other));
    assert_eq!(e.extra["round"], "three");
    assert_eq!(serde_json::to_value(&e).unwrap(), line);
}

#[test]
fn a_record_set_in_code_wins_over_an_unreadable_value_of_the_same_name() {
    let mut e = LogEntry::from_json(
        r#"{"schema_version":2,"id":"a1","role":"assistant","created_at":"t","round":"x"}"#,
    )
    .unwrap();
    e.records.round = Some(4);
    let text = serde_json::to_string(&e).unwrap();
    assert_eq!(text.matches("\"round\"").count(), 1, "{text}");
    assert_eq!(LogEntry::from_json(&text).unwrap().records.round, Some(4));
}

/// A user message with files: the person's words and the machine note are two text blocks
/// (both reach the model, in every format), the files a typed record that no model sees.
#[test]
fn attachments_are_a_record_and_both_text_blocks_reach_the_model() {
    let note = "Uploaded files (read one with file_reader {\"path\": \"<id>\"}):\n- <file_ref>upload_001</file_ref> sales.csv (text/csv, 20 bytes)";
    let line = json!({"schema_version":2,"id":"u1","role":"user","created_at":"t",
        "content":[{"type":"text","text":"Which region grew fastest?"},{"type":"text","text":note}],
        "attachments":[{"id":"upload_001","name":"sales.csv","media_type":"text/csv","size":20}]});
    let e = LogEntry::from_json(&line.to_string()).unwrap();
    assert!(e.extra.is_empty(), "{:?}", e.extra);
    let files = e.records.attachments.as_ref().unwrap();
    assert_eq!(
        (files[0].id.as_str(), files[0].name.as_str(), files[0].size),
        ("upload_001", "sales.csv", 20)
    );
    assert_eq!(serde_json::to_value(&e).unwrap(), line);
    let entries = [e];
    let sent = [
        serde_json::to_string(&ba_protocol::convert::log_to_anthropic(&entries).value).unwrap(),
        serde_json::to_string(&ba_protocol::convert::log_to_openai(&entries).value).unwrap(),
        serde_json::to_string(&ba_protocol::convert::log_to_responses(&entries).value).unwrap(),
    ];
    for body in sent {
        assert!(
            body.contains("Which region grew fastest?") && body.contains("<file_ref>upload_001"),
            "{body}"
        );
        assert!(!body.contains("attachments"), "{body}");
    }
}
