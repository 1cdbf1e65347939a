//! Forks over HTTP: `POST …/{id}/fork {"at_seq"}` makes a conversation whose history is the
//! parent's up to the cut (201 with its id, the parent and the cut); the fork reads like its
//! parent up to there, says where it came from, and keeps the parent from being deleted.

use serde_json::{Value, json};

use crate::harness::{Api, Model, Server, dir, two_rounds};

const Q: &str = "How many rows has the sales table?";

#[tokio::test]
async fn a_fork_reads_like_its_parent_up_to_the_cut_and_holds_it() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&two_rounds(Q), 0));
    let api = Api::new(&server);
    let id = api.create().await;
    let mut events = api.events(&id, None).await;
    let run = api
        .run(&id, "r1", json!({"type": "message", "text": Q}))
        .await;
    assert_eq!(run.status(), 202);
    events.until("finished").await;
    let fork_url = format!("/api/v1/conversations/{id}/fork");
    for (body, status) in [
        (json!({}), 400),
        (json!({"at_seq": 99}), 400),
        (json!({"at": 1}), 400),
    ] {
        let r = api.post(&fork_url, body.clone()).send().await.unwrap();
        assert_eq!(r.status(), status, "{body}");
    }
    let missing = api
        .post("/api/v1/conversations/nope/fork", json!({"at_seq": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let r = api
        .post(&fork_url, json!({"at_seq": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let forked: Value = r.json().await.unwrap();
    assert_eq!(
        (forked["parent"].as_str(), forked["at_seq"].as_u64()),
        (Some(id.as_str()), Some(1))
    );
    let child = forked["id"].as_str().unwrap();
    let messages = api
        .json(&format!("/api/v1/conversations/{child}/messages"))
        .await;
    let entries = messages["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["entry"]["content"], Q);
    let view = api.json(&format!("/api/v1/conversations/{child}")).await;
    assert_eq!(view["fork"], json!({"parent": id, "at_seq": 1}));
    assert_eq!(view["last_seq"], 1);
    let parent = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(parent["last_seq"], 4, "the parent is unchanged");
    let branches = api
        .json(&format!("/api/v1/conversations/{id}/branches"))
        .await;
    assert_eq!(branches["forks"][0]["id"], child);
    assert_eq!(branches["forks"][0]["at_seq"], 1);
    let branches = api
        .json(&format!("/api/v1/conversations/{child}/branches"))
        .await;
    assert_eq!(branches["fork"], json!({"parent": id, "at_seq": 1}));
    // A rewind of the parent: its last answer leaves the history the model sees (400 inside
    // the round of tool calls, 400 past the end).
    let rewind_url = format!("/api/v1/conversations/{id}/rewind");
    for (to, status) in [(2, 400), (9, 400)] {
        let r = api
            .post(&rewind_url, json!({"to_seq": to}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "to_seq {to}");
    }
    let r = api
        .post(&rewind_url, json!({"to_seq": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let rewound: Value = r.json().await.unwrap();
    assert_eq!(rewound, json!({"to_seq": 1, "taken_back": 3}));
    let parent = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(
        parent["last_seq"], 5,
        "the rewind is an entry; nothing was deleted"
    );
    // The parent stays while the fork lives.
    let del = |c: String| {
        let http = &api.http;
        let url = server.url(&format!("/api/v1/conversations/{c}"));
        async move {
            http.delete(url)
                .bearer_auth(crate::harness::TOKEN)
                .send()
                .await
                .unwrap()
        }
    };
    let refused = del(id.clone()).await;
    assert_eq!(refused.status(), 409);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "has_forks");
    assert!(del(child.to_owned()).await.status().is_success());
    assert!(del(id.clone()).await.status().is_success());
}
