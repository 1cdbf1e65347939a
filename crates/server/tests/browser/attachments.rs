//! A question's files on the page: the question's bubble and its edit box hold what the person
//! wrote and the files they attached (as chips), never the note the model is handed; an edit
//! keeps the chips it keeps, also for the first question (whose branch starts before any
//! upload); a download is saved under the file's own name, in any script.

use serde_json::{Value, json};

use crate::harness::*;

/// Drops files `(name, text)` on the composer, as a person drags them in, and waits for their
/// chips.
async fn drop_files(c: &fantoccini::Client, files: &[(&str, &str)]) {
    let list = Value::Array(files.iter().map(|(n, t)| json!([n, t])).collect());
    js(
        c,
        &format!(
            "const dt = new DataTransfer(); for (const [n, t] of {list}) dt.items.add(new File([t], n, {{type: 'text/csv'}})); \
            document.querySelector('#composer').dispatchEvent(new DragEvent('drop', {{dataTransfer: dt, bubbles: true, cancelable: true}})); return 1"
        ),
    )
    .await;
    wait_for(
        c,
        "the attachments",
        &format!(
            "return document.querySelectorAll('#attachments [data-upload-id]').length === {}",
            files.len()
        ),
    )
    .await;
}

/// The names on the chips of the element `css`.
async fn chips(c: &fantoccini::Client, css: &str) -> Value {
    js(
        c,
        &format!(
            "return [...document.querySelectorAll('{css} .chips.files .file-ref')].map((b) => b.textContent)"
        ),
    )
    .await
}

const ANSWERED: &str = "return document.querySelector('[data-component=final_report]') && \
    !document.querySelector('.report.streaming') && document.querySelector('#send').textContent === 'Send'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_first_question_keeps_its_files_as_chips() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        fallback: Some("West grew fastest.".into()),
        ..Options::default()
    })
    .await;
    let first = open_new(&c, &server).await;
    drop_files(
        &c,
        &[
            ("sales_2024.csv", "region,amount\nWest,210\nEast,145\n"),
            ("targets.csv", "region,target\nWest,200\n"),
        ],
    )
    .await;
    let question = "Which region grew fastest?";
    ask(&c, question).await;
    wait_for(&c, "the answer", ANSWERED).await;
    // The bubble: the words as typed, the files as chips; none of the model's note.
    let bubble = js(
        &c,
        "const u = document.querySelector('.turn .user'); const words = u.cloneNode(true); \
        words.querySelectorAll('.chips').forEach((x) => x.remove()); return [words.textContent, u.textContent]",
    )
    .await;
    assert_eq!(bubble[0], question);
    for machine in ["Uploaded files", "file_reader", "file_ref", "upload_0"] {
        assert!(!bubble[1].as_str().unwrap().contains(machine), "{bubble}");
    }
    assert_eq!(
        chips(&c, ".turn .user").await,
        json!(["sales_2024.csv", "targets.csv"])
    );

    // The edit box: the same words and chips; one chip removed, the words changed.
    click(&c, ".turn .user-tools .edit").await;
    let area = js(
        &c,
        "return document.querySelector('.edit-question textarea').value",
    )
    .await;
    assert_eq!(area, question);
    assert_eq!(
        chips(&c, ".edit-question").await,
        json!(["sales_2024.csv", "targets.csv"])
    );
    click(&c, ".edit-question .chip:nth-child(2) .remove").await;
    js(
        &c,
        "const a = document.querySelector('.edit-question textarea'); a.value = 'Which region grew fastest in 2024?'; return 1",
    )
    .await;
    screenshot(&c, "edit-question.png").await;
    click(&c, ".edit-question button[type=submit]").await;
    let branch = wait_for(
        &c,
        "the edited question's branch",
        &format!(
            "const u = new URL(location.href).searchParams.get('conversation'); \
            return u && u !== '{first}' && document.querySelector('.turn .user').textContent.includes('in 2024') && \
            document.querySelector('.branches .count') && document.querySelector('.branches .count').textContent === '2 / 2' && u"
        ),
    )
    .await;
    wait_for(&c, "the branch's answer", ANSWERED).await;
    assert_eq!(chips(&c, ".turn .user").await, json!(["sales_2024.csv"]));
    screenshot(&c, "edited-question.png").await;

    // The run was handed the file kept, and only it; the branch has it among its files.
    let branch = branch.as_str().unwrap();
    let entries = server
        .agent
        .store()
        .load(&ba_storage::ConversationId::new(branch).unwrap())
        .await
        .unwrap()
        .into_entries();
    let asked = entries
        .iter()
        .find(|e| e.role == ba_protocol::LogRole::User)
        .unwrap()
        .text()
        .into_owned();
    assert!(
        asked.starts_with("Which region grew fastest in 2024?"),
        "{asked}"
    );
    assert!(asked.contains("sales_2024.csv"), "{asked}");
    assert!(!asked.contains("targets.csv"), "{asked}");
    let files = server
        .api(
            reqwest::Method::GET,
            &format!("/api/v1/conversations/{branch}/files"),
            None,
        )
        .await;
    assert!(
        files["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "sales_2024.csv" && f["kind"] == "upload"),
        "{files}"
    );
    c.close().await.unwrap();
}

/// A question entry read as the person wrote it: by its `attachments` record (the words in the
/// first text block), or, in an older log, by cutting the model's note and reading its lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_read_from_its_record_or_its_note() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    open_new(&c, &server).await;
    let read = js(
        &c,
        r#"const q = window.baAgentPage.questionOf;
        const note = '\n\nUploaded files (read one with file_reader {"path": "<id>"}; run_python finds them in its working folder under their names):' +
          '\n- <file_ref>upload_001</file_ref> sales (2024).csv (text/csv, 1234 bytes) — the year, by region' +
          '\n- <file_ref>upload_002</file_ref> 销售.csv (text/csv, 1700 bytes)';
        return [
          q({role: 'user', content: [{type: 'text', text: 'Why?'}, {type: 'text', text: note}],
             attachments: [{id: 'upload_001', name: 'sales (2024).csv', media_type: 'text/csv', size: 1234}]}),
          q({role: 'user', content: 'Why?' + note}),
          q({role: 'user', content: 'No files here.'}),
        ];"#,
    )
    .await;
    assert_eq!(
        read,
        json!([
            {"text": "Why?", "files": [{"id": "upload_001", "name": "sales (2024).csv", "media_type": "text/csv", "size": 1234}]},
            {"text": "Why?", "files": [
                {"id": "upload_001", "name": "sales (2024).csv", "media_type": "text/csv", "size": 1234},
                {"id": "upload_002", "name": "销售.csv", "media_type": "text/csv", "size": 1700}]},
            {"text": "No files here.", "files": []},
        ])
    );
    c.close().await.unwrap();
}

/// A file named in Chinese is saved under its own name (the header's `filename*`), not the
/// ASCII stand-in; a header that does not decode falls back to the plain name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_is_saved_under_the_files_own_name() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        fallback: Some("Read.".into()),
        ..Options::default()
    })
    .await;
    open_new(&c, &server).await;
    js(&c, CATCH_DOWNLOADS).await;
    drop_files(&c, &[("销售_2024_gbk.csv", "区域,金额\n西部,210\n")]).await;
    ask(&c, "What is in my file?").await;
    wait_for(&c, "the answer", ANSWERED).await;
    let got = download(&c, ".turn .user .file-ref").await;
    assert_eq!(got["name"], "销售_2024_gbk.csv");
    assert_eq!(got["text"], "区域,金额\n西部,210\n");
    let names = js(
        &c,
        r#"const n = window.baAgentPage.savedName;
        return [
          n(`attachment; filename="___.csv"; filename*=UTF-8''%E9%94%80%E5%94%AE.csv`, 'x'),
          n(`attachment; filename*=utf-8'zh'%E9%94%80.csv; filename="_.csv"`, 'x'),
          n(`attachment; filename="plain.csv"; filename*=UTF-8''%E9%94`, 'x'),
          n(`attachment; filename*=UTF-8''..%2F..%2Fetc%2Fpasswd`, 'x'),
          n(`attachment; filename=".."`, 'fallback'),
          n(null, 'fallback'),
        ];"#,
    )
    .await;
    assert_eq!(
        names,
        json!([
            "销售.csv",
            "销.csv",
            "plain.csv",
            ".._.._etc_passwd",
            "fallback",
            "fallback"
        ])
    );
    c.close().await.unwrap();
}
