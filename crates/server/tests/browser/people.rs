//! Several people on one server (`--auth users`): each signs in by pasting a token once, sees
//! their own conversations only, and a viewer opens a report shared with them read-only. No
//! token is ever in the address bar.

use ba_storage::{ConversationStore, Role};
use serde_json::{Value, json};

use crate::harness::*;

/// An API call as the holder of `secret`.
async fn call(
    server: &Server,
    secret: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let mut r = reqwest::Client::new()
        .request(method, format!("http://{}{path}", server.addr))
        .bearer_auth(secret);
    if let Some(body) = body {
        r = r.json(&body);
    }
    let r = r.send().await.unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.status());
    let text = r.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// A conversation of the holder of `secret`; with `question`, asked and answered.
async fn conversation_of(server: &Server, secret: &str, question: Option<&str>) -> String {
    use reqwest::Method;
    let made = call(
        server,
        secret,
        Method::POST,
        "/api/v1/conversations",
        Some(json!({"mode": "agent"})),
    )
    .await;
    let id = made["id"].as_str().unwrap().to_owned();
    if let Some(text) = question {
        let body =
            json!({"request_id": format!("req-{id}"), "input": {"type": "message", "text": text}});
        call(
            server,
            secret,
            Method::POST,
            &format!("/api/v1/conversations/{id}/runs"),
            Some(body),
        )
        .await;
        let start = std::time::Instant::now();
        loop {
            let c = call(
                server,
                secret,
                Method::GET,
                &format!("/api/v1/conversations/{id}"),
                None,
            )
            .await;
            if c["status"] != "running" {
                assert_eq!(c["status"], "idle", "{c}");
                break;
            }
            assert!(start.elapsed() < LIMIT, "the run did not end: {c}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    id
}

/// The address bar holds no token (checked after every step).
async fn no_token_in_address_bar(c: &fantoccini::Client, secrets: &[&str]) {
    let url = c.current_url().await.unwrap().to_string();
    for secret in secrets {
        assert!(!url.contains(secret), "a token in the address bar: {url}");
    }
    assert!(!url.contains("token"), "{url}");
}

async fn listed(c: &fantoccini::Client, list: &str) -> Value {
    js(
        c,
        &format!("return [...document.querySelectorAll('{list} li')].map((li) => li.dataset.id)"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_see_their_own_and_a_viewer_reads_a_shared_report() {
    let _one = BROWSER.lock().await;
    let Some(alice_tab) = browser().await else {
        return;
    };
    let Some(bob_tab) = browser().await else {
        return;
    };
    let server = Server::start(Options {
        users: true,
        ..Options::default()
    })
    .await;
    let directory = server.agent.store().directory().unwrap();
    let mut secrets = std::collections::HashMap::new();
    for (name, role) in [
        ("alice", Role::Analyst),
        ("bob", Role::Analyst),
        ("vera", Role::Viewer),
    ] {
        directory.add_user(name, role).await.unwrap();
        secrets.insert(name, directory.issue_token(name).await.unwrap().secret);
    }
    let all: Vec<&str> = secrets.values().map(String::as_str).collect();
    let alices = conversation_of(&server, &secrets["alice"], Some(QUESTION)).await;
    let bobs = conversation_of(&server, &secrets["bob"], None).await;

    // Side by side: each tab signs in with its own token and lists its own conversation only.
    for (tab, who, own, other) in [
        (&alice_tab, "alice", &alices, &bobs),
        (&bob_tab, "bob", &bobs, &alices),
    ] {
        tab.goto(&server.url("")).await.unwrap();
        no_token_in_address_bar(tab, &all).await;
        sign_in(tab, &secrets[who]).await;
        no_token_in_address_bar(tab, &all).await;
        wait_for(
            tab,
            "the own conversation listed",
            &format!("return Boolean(document.querySelector('#conv-list li[data-id=\"{own}\"]'))"),
        )
        .await;
        assert_eq!(listed(tab, "#conv-list").await, json!([own]), "{who}");
        assert_eq!(listed(tab, "#shared-list").await, json!([]), "{who}");
        let shown = js(
            tab,
            "return document.querySelector('#whoami-text').textContent",
        )
        .await;
        assert!(
            shown
                .as_str()
                .unwrap()
                .starts_with(&format!("{who} (analyst)")),
            "{shown}"
        );
        assert!(
            !js(tab, "return document.body.innerText")
                .await
                .as_str()
                .unwrap()
                .contains(other.as_str())
        );
    }
    // Bob cannot open Alice's conversation by its address: the page says it does not exist.
    bob_tab.goto(&server.url(&alices)).await.unwrap();
    wait_for(
        &bob_tab,
        "the refusal",
        "return document.querySelector('#notice').textContent.includes('does not exist')",
    )
    .await;
    no_token_in_address_bar(&bob_tab, &all).await;
    bob_tab.close().await.unwrap();

    // Shared with vera: her page lists it under "Shared with me" and opens its report with no
    // composer.
    call(
        &server,
        &secrets["alice"],
        reqwest::Method::POST,
        &format!("/api/v1/conversations/{alices}/shares"),
        Some(json!({"user": "vera", "access": "read"})),
    )
    .await;
    let Some(vera_tab) = browser().await else {
        return;
    };
    vera_tab.goto(&server.url(&alices)).await.unwrap();
    sign_in(&vera_tab, &secrets["vera"]).await;
    no_token_in_address_bar(&vera_tab, &all).await;
    loaded(&vera_tab).await;
    assert_eq!(listed(&vera_tab, "#shared-list").await, json!([alices]));
    assert_eq!(listed(&vera_tab, "#conv-list").await, json!([]));
    wait_for(
        &vera_tab,
        "the shared report",
        "const r = document.querySelector('[data-component=final_report]'); \
         return r && r.textContent.includes('West beat its Q3 2024 target')",
    )
    .await;
    // Read-only: no question can be edited, no composer, no mode switch.
    let controls = js(
        &vera_tab,
        "return [...document.querySelectorAll('.user-tools, #composer, #mode')] \
         .filter((e) => e.offsetParent !== null).length",
    )
    .await;
    assert_eq!(
        controls, 0,
        "controls that change the conversation are shown"
    );
    let state = js(&vera_tab, "return [document.body.dataset.readonly, document.querySelector('#composer').hidden, \
        document.querySelector('#new-conv').hidden, document.querySelector('#whoami-text').textContent]").await;
    assert_eq!(state[0], "yes", "{state}");
    assert_eq!(state[1], true, "{state}");
    assert_eq!(state[2], true, "{state}");
    assert!(
        state[3].as_str().unwrap().starts_with("vera (viewer)"),
        "{state}"
    );
    screenshot(&vera_tab, "people-viewer-shared-report.png").await;
    no_token_in_address_bar(&vera_tab, &all).await;
    // The tab keeps the token for a reload, never the address bar.
    vera_tab.refresh().await.unwrap();
    loaded(&vera_tab).await;
    no_token_in_address_bar(&vera_tab, &all).await;
    assert_eq!(
        js(&vera_tab, "return sessionStorage.getItem('ba-token')").await,
        secrets["vera"].as_str()
    );
    vera_tab.close().await.unwrap();
    alice_tab.close().await.unwrap();
}

/// An admin's page has the "Users…" dialog: a new user, a role and a budget changed, and a new
/// token shown once that signs its user in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_manages_users_in_the_page() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        users: true,
        ..Options::default()
    })
    .await;
    let directory = server.agent.store().directory().unwrap();
    directory.add_user("ada", Role::Admin).await.unwrap();
    directory.add_user("bob", Role::Analyst).await.unwrap();
    let ada = directory.issue_token("ada").await.unwrap().secret;
    c.goto(&server.url("")).await.unwrap();
    sign_in(&c, &ada).await;
    click(&c, "#admin-open").await;
    wait_for(
        &c,
        "bob's row",
        "return Boolean(document.querySelector('#admin-body tr[data-user=bob]'))",
    )
    .await;
    // bob becomes a viewer with $3 a month.
    js(
        &c,
        "const row = document.querySelector('#admin-body tr[data-user=bob]'); \
         row.querySelector('select').value = 'viewer'; \
         row.querySelector('input[type=number]').value = '3'; return 1",
    )
    .await;
    click(&c, "#admin-body tr[data-user=bob] td:last-child button").await;
    wait_for(
        &c,
        "the change saved",
        "return document.querySelector('#admin-body tr[data-user=bob] output').textContent === 'saved'",
    )
    .await;
    let bob = directory.user("bob").await.unwrap().unwrap();
    assert_eq!(bob.role, Role::Viewer);
    assert_eq!(bob.budget.month_usd, Some(3.0));
    // A new token, shown once, signs bob in.
    click(
        &c,
        "#admin-body tr[data-user=bob] td:last-child button:nth-of-type(2)",
    )
    .await;
    let shown = wait_for(
        &c,
        "the new token",
        "const t = document.querySelector('#admin-body tr[data-user=bob] output').textContent; \
         return t.startsWith('Token (shown once): ') && t.slice(20)",
    )
    .await;
    let me = call(
        &server,
        shown.as_str().unwrap(),
        reqwest::Method::GET,
        "/api/v1/me",
        None,
    )
    .await;
    assert_eq!(me["name"], "bob");
    assert_eq!(me["role"], "viewer");
    let url = c.current_url().await.unwrap().to_string();
    assert!(
        !url.contains(&ada) && !url.contains(shown.as_str().unwrap()),
        "{url}"
    );
    c.close().await.unwrap();
}
