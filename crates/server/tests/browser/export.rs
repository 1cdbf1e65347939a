//! An answer leaves the page: "Export HTML" downloads one file that, opened on its own (from
//! disk, the server stopped), shows its table, its chart (drawn as an image, no script) and the
//! images it names, and asks nothing of anyone; "Export Markdown" gives a zip of the answer as
//! Markdown with its images and files beside it; the zip export holds the HTML report with a
//! copy of every file it links, and those links lead to the copies. The cost lines (under each
//! answer, and the conversation's in the sidebar) say what the metrics report says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ba_testkit::files::unzip;
use base64::Engine as _;
use serde_json::{Value, json};

use crate::harness::*;

/// Like [`CATCH_DOWNLOADS`], keeping each download's bytes too (base64), for the zips.
const CATCH_BYTES: &str = "window.__downloads = []; const blobs = new Map(); \
    const create = URL.createObjectURL; \
    URL.createObjectURL = function (b) { const u = create.call(URL, b); blobs.set(u, b); return u; }; \
    const click = HTMLAnchorElement.prototype.click; \
    HTMLAnchorElement.prototype.click = function () { \
      const b = blobs.get(this.href); \
      if (!b || !this.download) return click.call(this); \
      const name = this.download; \
      b.arrayBuffer().then((buf) => { const u = new Uint8Array(buf); let s = ''; \
        for (let i = 0; i < u.length; i += 8192) s += String.fromCharCode(...u.subarray(i, i + 8192)); \
        window.__downloads.push({name, text: new TextDecoder().decode(u), base64: btoa(s)}); }); \
    }; return 1";

fn bytes_of(download: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(download["base64"].as_str().unwrap())
        .unwrap()
}

/// Waits for an answer's export buttons.
async fn export_buttons(c: &fantoccini::Client) {
    wait_for(
        c,
        "the export buttons",
        "return document.querySelector('[data-component=export_report] button')",
    )
    .await;
}

/// Writes the entries into `dir`, as unzipping does; the folder they are under.
fn extract(entries: &BTreeMap<String, Vec<u8>>, dir: &Path) -> PathBuf {
    for (name, data) in entries {
        assert!(
            !name.contains("..") && !name.starts_with('/'),
            "an entry leaves the folder: {name}"
        );
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, data).unwrap();
    }
    let top = entries.keys().next().unwrap().split('/').next().unwrap();
    dir.join(top)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_report_reads_on_its_own_with_its_table_and_chart() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    let id = open_new(&c, &server).await;
    js(&c, CATCH_BYTES).await;
    ask(&c, CHART_QUESTION).await;
    export_buttons(&c).await;
    let html = download(&c, "[data-component=export_report] button:nth-child(1)").await;
    let name = html["name"].as_str().unwrap().to_string();
    assert!(
        name.starts_with("report-") && name.ends_with(".html"),
        "{name}"
    );
    let text = html["text"].as_str().unwrap().to_string();
    assert!(!text.contains("<script"), "the export holds a script");
    assert!(
        !text.contains(&server.addr.to_string()),
        "the export names the server"
    );
    let md = download(&c, "[data-component=export_report] button:nth-child(2)").await;
    assert!(
        md["name"].as_str().unwrap().ends_with("-md.zip"),
        "{}",
        md["name"]
    );
    let entries = unzip(&bytes_of(&md));
    let report = entries
        .iter()
        .find_map(|(k, v)| {
            k.ends_with("/report.md")
                .then(|| String::from_utf8_lossy(v))
        })
        .unwrap();
    assert!(report.starts_with("# "), "{report}");
    assert!(report.contains("<td>West</td>"), "{report}");
    // The chart is an image beside it, linked relatively.
    let chart = entries
        .iter()
        .find(|(k, _)| k.ends_with("/files/chart-1.svg"))
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_else(|| panic!("no chart beside the Markdown: {:?}", entries.keys()));
    assert!(report.contains("src=\"files/chart-1.svg\""), "{report}");
    assert_eq!(chart.matches("class=\"bar\"").count(), 20, "{chart}");

    // Opened from disk, in a browser with no server to ask.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(&name);
    std::fs::write(&file, &text).unwrap();
    c.goto("about:blank").await.unwrap();
    server.stop().await;
    c.goto(&format!("file://{}", file.display())).await.unwrap();
    let shown = wait_for(
        &c,
        "the exported chart decoded",
        "const img = document.querySelector('figure.chart img'); \
         return img && img.complete && img.naturalWidth > 0 && \
           {width: img.naturalWidth, rows: document.querySelectorAll('table tbody tr').length, \
            cells: [...document.querySelectorAll('table td')].map((t) => t.textContent), \
            title: document.title, question: document.querySelector('.question').textContent, \
            requests: performance.getEntriesByType('resource').map((r) => r.name), \
            scripts: document.scripts.length}",
    )
    .await;
    eprintln!("exported {id}: {shown}");
    assert_eq!(shown["rows"], 5, "{shown}");
    assert!(
        shown["cells"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "444,645"),
        "{shown}"
    );
    assert!(
        shown["question"].as_str().unwrap().contains(CHART_QUESTION),
        "{shown}"
    );
    assert_eq!(shown["scripts"], 0, "{shown}");
    assert_eq!(shown["requests"], serde_json::json!([]), "{shown}");
    // The chart is the report's: its bars drawn, its series named.
    let svg = js(
        &c,
        "const src = document.querySelector('figure.chart img').src; \
         return atob(src.slice(src.indexOf(',') + 1))",
    )
    .await;
    let svg = svg.as_str().unwrap();
    assert_eq!(svg.matches("class=\"bar\"").count(), 20, "{svg}");
    for region in ["Central", "East", "North", "South", "West"] {
        assert!(svg.contains(region), "{region} missing from the chart");
    }
    screenshot(&c, "exported-chart-report.png").await;
    c.close().await.unwrap();
}

/// `$0.0123` below ten cents, `$1.23` above: the page's rule.
fn money(usd: f64) -> String {
    if usd >= 0.1 {
        format!("${usd:.2}")
    } else {
        format!("${usd:.4}")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cost_lines_match_the_metrics_report() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let mut prices = std::collections::BTreeMap::new();
    prices.insert(
        "demo".to_string(),
        ba_agent::ModelPrice {
            input: 3.0,
            output: 15.0,
            cache_read: Some(0.3),
            cache_write: None,
        },
    );
    let server = Server::start(Options {
        prices: ba_agent::Prices::new(prices).unwrap(),
        ..Options::default()
    })
    .await;
    // An earlier conversation, so the sidebar lists two titles.
    let earlier = server.conversation().await;
    server.run_to_end(&earlier, CHART_QUESTION).await;
    let id = open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the first answer",
        "return document.querySelectorAll('[data-component=export_report]').length === 1",
    )
    .await;
    ask(&c, CHART_QUESTION).await;
    wait_for(
        &c,
        "the second answer",
        "return document.querySelectorAll('[data-component=export_report]').length === 2",
    )
    .await;
    let report = server
        .api(
            reqwest::Method::GET,
            &format!("/api/v1/conversations/{id}/report"),
            None,
        )
        .await;
    let cost = report["cost_usd"].as_f64().unwrap();
    assert!(cost > 0.0, "{report}");
    assert!(report.get("unpriced_calls").is_none(), "{report}");
    let fmt = |n: &serde_json::Value| {
        let n = n.as_u64().unwrap();
        let s = n.to_string();
        let mut out = String::new();
        for (i, ch) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(ch);
        }
        out
    };
    let expected = format!(
        "This conversation — Tokens: {} in · {} out · {} cached · {} model calls · {}",
        fmt(&report["input_tokens"]),
        fmt(&report["output_tokens"]),
        fmt(&report["cache_read_tokens"]),
        report["model_calls"],
        money(cost)
    );
    let side = wait_for(
        &c,
        "the sidebar's cost line",
        &format!(
            "const p = document.querySelector('#conv-cost'); return p && !p.hidden && p.textContent === {} && p.textContent",
            serde_json::Value::String(expected.clone())
        ),
    )
    .await;
    assert_eq!(side, expected.as_str());
    // Each answer's line covers its own calls; together they are the conversation's.
    let lines = js(
        &c,
        "return [...document.querySelectorAll('[data-component=cost]')].map((d) => ({text: d.textContent, cost: Number(d.dataset.cost)}))",
    )
    .await;
    let lines = lines.as_array().unwrap();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let sum: f64 = lines.iter().map(|l| l["cost"].as_f64().unwrap()).sum();
    assert!(
        (sum - cost).abs() < 1e-9,
        "answers {sum} against the report's {cost}"
    );
    for l in lines {
        let text = l["text"].as_str().unwrap();
        assert!(
            text.ends_with(&money(l["cost"].as_f64().unwrap())),
            "{text}"
        );
    }
    // The sidebar's titles, the cost line and the first answer's compression notice.
    wait_for(
        &c,
        "both titles in the sidebar",
        "return document.querySelectorAll('#conv-list li').length === 2",
    )
    .await;
    c.execute(
        "document.querySelector('[data-notice=compression]').scrollIntoView({block: 'center'})",
        vec![],
    )
    .await
    .unwrap();
    screenshot(&c, "cost.png").await;
    c.close().await.unwrap();
}

/// The provider's cache figures reach the page: a model that reports tokens read from and
/// written to its prompt cache (Anthropic's `cache_read_input_tokens` and
/// `cache_creation_input_tokens`) has both under its answer and in the sidebar's line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_figures_of_a_call_reach_the_page() {
    use ba_testkit::model::{ScriptedModel, Turn};
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let model = ScriptedModel::builder()
        .rule(
            "answer from the cache",
            |_| true,
            |_| {
                let answer = serde_json::json!({
                    "task_analysis": "A greeting.",
                    "execution_plan": "R1: answer",
                    "current_round": 1,
                    "action": {"type": "complete", "content": "Hello again.", "download_links": []}
                });
                Turn::text(answer.to_string())
                    .with_usage(1_000, 50)
                    .with_cached_tokens(4_000)
                    .with_cache_write_tokens(1_200)
            },
        )
        .start()
        .await;
    let server = Server::start(Options {
        anthropic_base_url: Some(model.anthropic_base_url()),
        ..Options::default()
    })
    .await;
    open_new(&c, &server).await;
    ask(&c, "Hello?").await;
    let expected =
        "Tokens: 1,000 in · 50 out · 4,000 cached · 1,200 written to cache · 1 model call";
    let line = wait_for(
        &c,
        "the answer's cost line",
        "const d = document.querySelector('[data-component=cost]'); return d && d.textContent",
    )
    .await;
    assert_eq!(line, expected);
    let side = wait_for(
        &c,
        "the sidebar's cost line",
        "const p = document.querySelector('#conv-cost'); return p && !p.hidden && p.textContent",
    )
    .await;
    assert_eq!(
        side.as_str().unwrap(),
        format!("This conversation — {expected}")
    );
    c.close().await.unwrap();
}

/// A PNG of `width`×`height` drawn by `pixel` (RGB), deflate's stored blocks: the image a
/// person attached, made here so the test needs no image library.
fn png(width: u32, height: u32, pixel: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
    fn crc32(data: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 == 1 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend((data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend(kind);
        out.extend(data);
        let crc = crc32(&out[start..]);
        out.extend(crc.to_be_bytes());
    }
    let mut raw = Vec::new();
    for y in 0..height {
        raw.push(0);
        for x in 0..width {
            raw.extend(pixel(x, y));
        }
    }
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65_535).collect();
    for (i, block) in blocks.iter().enumerate() {
        z.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        z.extend(len.to_le_bytes());
        z.extend((!len).to_le_bytes());
        z.extend(*block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &raw {
        a = (a + u32::from(x)) % 65_521;
        b = (b + a) % 65_521;
    }
    z.extend(((b << 16) | a).to_be_bytes());
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = width.to_be_bytes().to_vec();
    header.extend(height.to_be_bytes());
    header.extend([8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &header);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// West's sales month by month as twelve bars, the tallest in July to September.
fn west_by_month() -> Vec<u8> {
    const MONTHS: [u32; 12] = [46, 44, 52, 41, 45, 47, 140, 150, 155, 48, 46, 47];
    png(480, 200, |x, y| {
        let slot = x / 40;
        let inside = x % 40 >= 8 && x % 40 < 32;
        let height = MONTHS[slot as usize];
        if inside && y >= 190 - height && y < 190 {
            if (6..9).contains(&slot) {
                [84, 112, 198]
            } else {
                [145, 204, 117]
            }
        } else if y == 190 || (y % 40 == 30 && y < 190) {
            [220, 224, 232]
        } else {
            [255, 255, 255]
        }
    })
}

const TARGETS: &str =
    "region,target\nCentral,600000\nEast,800000\nNorth,700000\nSouth,650000\nWest,775000\n";

/// The answer of a person who attached the targets and a chart of their own: an HTML report
/// with an ECharts chart, the attached chart shown, the targets linked, the code behind it.
fn targets_answer() -> Value {
    let content = "<h2>2024 sales against targets</h2>\
<p>West beat its target of 775,000 by 11%; every other region fell short. The targets are in \
<file_ref>upload_001</file_ref>.</p>\
<div id=\"chart\" style=\"width:100%;height:300px\"></div>\
<script>var chart = echarts.init(document.getElementById('chart'));\
chart.setOption({animation: false, legend: {top: 0}, tooltip: {},\
 xAxis: {type: 'category', data: ['Central', 'East', 'North', 'South', 'West']},\
 yAxis: {type: 'value'},\
 series: [{name: 'Sales', type: 'bar', data: [573092, 788299, 692685, 596750, 860232]},\
 {name: 'Target', type: 'bar', data: [600000, 800000, 700000, 650000, 775000]}]});</script>\
<p>West month by month, from the chart you attached: the jump is July to September.</p>\
<file_ref>upload_002</file_ref>\
<code_ref>code_targets</code_ref>";
    let body = json!({"task_analysis": "Sales against the attached targets.",
        "execution_plan": "R1: compare and chart", "current_round": 1,
        "action": {"type": "complete", "content": content, "code_blocks": [{
            "code_id": "code_targets", "language": "python",
            "description": "Sales against targets by region",
            "code": "import pandas as pd\nsales = pd.read_csv('sales.csv').groupby('region')['amount'].sum()\ntargets = pd.read_csv('targets.csv').set_index('region')['target']\nprint((sales / targets - 1).round(3))\n"}]}});
    json!({"expect": {"role": "user"}, "response": {"message": {"role": "assistant",
        "content": [{"type": "text", "text": body.to_string()}]}, "stop_reason": "end_turn"}})
}

async fn upload(server: &Server, id: &str, name: &str, bytes: &[u8]) -> String {
    let (kind, body) = ba_testkit::files::multipart_file(name, bytes);
    let r = reqwest::Client::new()
        .post(format!(
            "http://{}/api/v1/conversations/{id}/uploads",
            server.addr
        ))
        .bearer_auth(TOKEN)
        .header("Content-Type", kind)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `file:///…` (percent-encoded) as a path.
fn file_path(url: &str) -> PathBuf {
    let encoded = url.strip_prefix("file://").unwrap();
    let bytes = encoded.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(u8::from_str_radix(&encoded[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(String::from_utf8(out).unwrap())
}

/// The analyst's export: the question came with the targets (CSV) and a chart of their own
/// (PNG); the answer shows the chart it drew, the attached chart and its code, and links the
/// targets. "Export HTML" gives one page with both images inside; the zip export, unpacked and
/// opened from disk with the server stopped, shows it all, fetches nothing, runs nothing, shows
/// no id or tag, and its links lead to the copies beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_bundle_opens_from_disk_with_its_files_and_the_server_stopped() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        extra_turns: vec![targets_answer()],
        ..Options::default()
    })
    .await;
    let id = server.conversation().await;
    let chart = west_by_month();
    assert_eq!(
        upload(&server, &id, "targets.csv", TARGETS.as_bytes()).await,
        "upload_001"
    );
    assert_eq!(
        upload(&server, &id, "west_by_month.png", &chart).await,
        "upload_002"
    );
    let question = "Did each region meet its target in <file_ref>upload_001</file_ref>?";
    server
        .api(
            reqwest::Method::POST,
            &format!("/api/v1/conversations/{id}/runs"),
            Some(
                json!({"request_id": "r1", "input": {"type": "message", "text": question,
                "upload_ids": ["upload_001", "upload_002"]}}),
            ),
        )
        .await;
    goto(&c, &server, &id).await;
    loaded(&c).await;
    js(&c, CATCH_BYTES).await;
    export_buttons(&c).await;

    // "Export HTML": one file, both images inside, no server path.
    let html = download(&c, "[data-component=export_report] button:nth-child(1)").await;
    let text = html["text"].as_str().unwrap();
    let attached = base64::engine::general_purpose::STANDARD.encode(&chart);
    assert!(
        text.contains(&format!("src=\"data:image/png;base64,{attached}\"")),
        "{text}"
    );
    assert!(
        text.contains("src=\"data:image/svg+xml;base64,"),
        "no chart drawn: {text}"
    );
    for inside in [
        id.as_str(),
        "/api/v1",
        "file_ref",
        "upload_00",
        "Uploaded files (",
        "<script",
    ] {
        assert!(!text.contains(inside), "the export shows {inside:?}");
    }

    // "Export Markdown": a zip, the images and the targets beside report.md.
    let md = download(&c, "[data-component=export_report] button:nth-child(2)").await;
    let entries = unzip(&bytes_of(&md));
    let md_dir = tempfile::tempdir().unwrap();
    let md_folder = extract(&entries, md_dir.path());
    let report = std::fs::read_to_string(md_folder.join("report.md")).unwrap();
    for linked in [
        "files/targets.csv",
        "files/west_by_month.png",
        "files/chart-1.svg",
    ] {
        assert!(report.contains(linked), "{linked} not linked: {report}");
        assert!(
            md_folder.join(linked).is_file(),
            "{linked} not beside report.md"
        );
    }
    assert_eq!(
        std::fs::read(md_folder.join("files/west_by_month.png")).unwrap(),
        chart
    );

    // The zip export, unpacked.
    let r = reqwest::Client::new()
        .get(format!(
            "http://{}/api/v1/conversations/{id}/report/last?format=zip",
            server.addr
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let dir = tempfile::tempdir().unwrap();
    let folder = extract(&unzip(&r.bytes().await.unwrap()), dir.path());

    // The server stops; the report opens from disk.
    c.goto("about:blank").await.unwrap();
    server.stop().await;
    c.goto(&format!("file://{}", folder.join("report.html").display()))
        .await
        .unwrap();
    let shown = wait_for(
        &c,
        "the exported report's images decoded",
        "const imgs = [...document.querySelectorAll('figure img')]; \
         return imgs.length === 2 && imgs.every((i) => i.complete && i.naturalWidth > 0) && \
           {images: imgs.map((i) => [i.closest('figure').className, i.naturalWidth]), \
            links: [...document.querySelectorAll('a[href]')].map((a) => [a.textContent, a.href]), \
            question: document.querySelector('.question').innerText, \
            text: document.body.innerText, \
            code: document.querySelector('figure.code pre').textContent, \
            requests: performance.getEntriesByType('resource').map((r) => r.name), \
            scripts: document.scripts.length}",
    )
    .await;
    eprintln!("opened from disk: {shown:#}");
    let images = shown["images"].as_array().unwrap();
    assert_eq!(images[0][0], "chart", "the drawn chart first: {images:?}");
    assert_eq!(
        images[1],
        json!(["image", 480]),
        "then the attached one, whole"
    );
    assert_eq!(shown["scripts"], 0);
    assert_eq!(shown["requests"], json!([]), "the report fetched something");
    let asked = shown["question"].as_str().unwrap();
    assert!(
        asked.contains("Did each region meet its target in targets.csv?")
            && asked.contains("Attached: targets.csv, west_by_month.png"),
        "{asked}"
    );
    let body = shown["text"].as_str().unwrap();
    for inside in [
        id.as_str(),
        "file_ref",
        "upload_00",
        "answer ",
        "Conversation ",
    ] {
        assert!(
            !body.contains(inside),
            "the report shows {inside:?}: {body}"
        );
    }
    assert!(
        shown["code"]
            .as_str()
            .unwrap()
            .contains("targets = pd.read_csv('targets.csv')")
    );
    // Every link leads to a copy beside the report.
    let links = shown["links"].as_array().unwrap();
    assert!(!links.is_empty());
    for link in links {
        let path = file_path(link[1].as_str().unwrap());
        assert!(path.starts_with(&folder), "{link} leads out of the report");
        assert!(path.is_file(), "{link} leads nowhere");
    }
    let csv = links.iter().find(|l| l[0] == "targets.csv").unwrap();
    assert_eq!(
        std::fs::read_to_string(file_path(csv[1].as_str().unwrap())).unwrap(),
        TARGETS
    );
    // The whole report in one picture.
    let height = js(&c, "return document.documentElement.scrollHeight").await;
    let height = u32::try_from(height.as_u64().unwrap()).unwrap();
    c.set_window_size(1280, height + 140).await.unwrap();
    screenshot(&c, "exported-report.png").await;
    // The attached chart's link opens the copy.
    let png_link = links.iter().find(|l| l[0] == "west_by_month.png").unwrap();
    c.goto(png_link[1].as_str().unwrap()).await.unwrap();
    wait_for(
        &c,
        "the copied image to open",
        "const i = document.images[0]; return i && i.complete && i.naturalWidth === 480",
    )
    .await;
    c.close().await.unwrap();
}
