use super::*;

fn kinds_and_best(text: &str) -> (OutputKind, String) {
    let r = read_output(text);
    let best = r.items.first().map(|i| i.render(80)).unwrap_or_default();
    (r.kind, best)
}

#[test]
fn a_one_row_result_after_a_table_is_the_key_figure() {
    let text = " city  | visits\n-------+--------\n Porto |    312\n Braga |    207\n Faro  |     98\n(3 rows)\n\n  visits_all\n------------\n         617\n(1 row)\n";
    let (kind, best) = kinds_and_best(text);
    assert_eq!(kind, OutputKind::Tables);
    assert_eq!(best, "visits_all = 617");
}

#[test]
fn a_pivot_margin_keeps_its_row_and_column() {
    let text = "quarter      Q1     Q2     Q3    All\nteam\nalpha      10.5   20.0   30.0   60.5\nbeta        1.0    2.0    3.0    6.0\ngamma       4.0    4.0    4.0   12.0\nAll        15.5   26.0   37.0   78.5";
    let r = read_output(text);
    assert_eq!(r.kind, OutputKind::Table);
    assert_eq!(
        r.items[0].render(60),
        "All · All = 78.5; Q3 = 37.0; Q2 = 26.0; Q1 = 15.5"
    );
    assert_eq!(r.items[0].render(20), "All · All = 78.5");
}

#[test]
fn rollup_rows_are_read_by_their_empty_grouping_cells() {
    let text = "shop,item,qty\nA,pen,3\nA,ink,4\nA,,7\nB,pen,1\nB,cap,2\nB,,3\n,,10";
    let r = read_output(text);
    assert_eq!(r.kind, OutputKind::Table);
    assert_eq!(r.items[0].render(40), "(all) · qty = 10");
    let whys: Vec<&str> = r.items.iter().take(3).map(|i| i.why).collect();
    assert_eq!(whys, ["aggregate row"; 3]);
}

#[test]
fn a_document_value_keeps_its_path() {
    let text = r#"{"run": {"lots": [{"w": 1.5}, {"w": 2.5}, {"w": 3.0}], "outcome": {"weight_total": 7.0, "lots": 3}}}"#;
    let r = read_output(text);
    assert_eq!(r.kind, OutputKind::Json);
    assert_eq!(
        r.items[0].render(80),
        "run.outcome · weight_total = 7.0; lots = 3"
    );
    let yaml = "run:\n  lots:\n    - w: 1.5\n    - w: 2.5\n    - w: 3.0\n  outcome:\n    weight_total: 7.0\n";
    let r = read_output(yaml);
    assert_eq!(r.kind, OutputKind::Yaml);
    assert_eq!(r.items[0].render(80), "run.outcome · weight_total = 7.0");
}

#[test]
fn a_log_line_of_its_own_kind_outweighs_the_repeated_ones() {
    let mut text = String::new();
    for i in 0..20 {
        text.push_str(&format!(
            "2025-03-01 10:00:{i:02} INFO fetched page {i} of 20\n"
        ));
        if i == 7 {
            text.push_str("2025-03-01 10:00:07 INFO cache warmed with 48211 keys\n");
        }
    }
    let (kind, best) = kinds_and_best(&text);
    assert_eq!(kind, OutputKind::Log);
    assert_eq!(best, "INFO cache warmed with 48211 keys");
}

#[test]
fn a_traceback_is_read_for_its_exception() {
    let text = "Traceback (most recent call last):\n  File \"job.py\", line 3, in <module>\n    main()\n  File \"job.py\", line 2, in main\n    check(41)\nKeyError: 'region 41 has no rate'";
    let r = read_output(text);
    assert_eq!(r.kind, OutputKind::Traceback);
    assert_eq!(r.items[0].render(80), "KeyError: 'region 41 has no rate'");
    assert_eq!(r.items[1].render(80), "File \"job.py\", line 2, in main");
}

#[test]
fn prose_is_read_for_the_sentence_with_its_largest_figure() {
    let text = "The morning shift packed 1210 boxes and the evening shift 1530. Night work added 880 more. Over the day the plant shipped 3620 boxes to four depots. Two trucks left late because of rain.";
    let (kind, best) = kinds_and_best(text);
    assert_eq!(kind, OutputKind::Prose);
    assert_eq!(
        best,
        "Over the day the plant shipped 3620 boxes to four depots."
    );
}

#[test]
fn a_long_line_keeps_its_start_and_its_figure() {
    let line = "settlement batch 4471 for the northern depots closed after the late postings came in at 88231.40 in all";
    let cut = clip(line, 50);
    assert!(cut.starts_with("settlement batch"), "{cut}");
    assert!(cut.contains("88231.40"), "{cut}");
    assert!(cut.chars().count() <= 50, "{cut}");
}
