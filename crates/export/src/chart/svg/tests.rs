//! The drawer's pictures, whole: every series kind and the grid's forms (vertical and
//! horizontal, category and value axes, stacks, groups, areas, gaps, datasets, mixes), so a
//! change to any coordinate, color or label shows.

use serde_json::{Value, json};

use super::render_option;

fn draw(option: Value) -> String {
    let (svg, _) = render_option(&option, 720.0, 360.0);
    svg
}

#[test]
fn grouped_bars_with_axis_names_and_negatives() {
    insta::assert_snapshot!(draw(json!({
        "title": {"text": "Margin by quarter", "subtext": "2024", "left": "center"},
        "legend": {},
        "xAxis": {"type": "category", "name": "Quarter", "data": ["Q1", "Q2", "Q3", "Q4"]},
        "yAxis": {"type": "value", "name": "EUR"},
        "series": [
            {"name": "North", "type": "bar", "data": [1200, -300, 4500.5, 800]},
            {"name": "South", "type": "bar", "data": [900, 1100, "-", 2500]},
            {"name": "Target", "type": "bar", "itemStyle": {"color": "#123456"}, "data": [1000, 1000, 1000, 1000]}
        ]
    })));
}

#[test]
fn stacked_horizontal_bars() {
    insta::assert_snapshot!(draw(json!({
        "yAxis": {"type": "category", "data": ["Alpha", "Beta", "Gamma"]},
        "xAxis": {"type": "value"},
        "series": [
            {"name": "Won", "type": "bar", "stack": "all", "data": [5, 7, 2]},
            {"name": "Lost", "type": "bar", "stack": "all", "data": [-3, 4, -1]},
            {"name": "Open", "type": "bar", "data": [1, 2, 3]}
        ]
    })));
}

#[test]
fn stacked_areas_with_gaps_and_no_boundary_gap() {
    insta::assert_snapshot!(draw(json!({
        "color": ["#aa0000", "rgb(0, 128, 0)"],
        "xAxis": {"type": "category", "boundaryGap": false, "data": ["Mon", "Tue", "Wed", "Thu", "Fri"]},
        "yAxis": {},
        "series": [
            {"name": "Email", "type": "line", "stack": "t", "areaStyle": {"opacity": 0.5}, "data": [120, 132, null, 134, 90]},
            {"name": "Ads", "type": "line", "stack": "t", "areaStyle": {}, "symbol": "none", "data": [220, 182, 191, 234, 290]},
            {"name": "Direct", "type": "line", "showSymbol": false, "data": [320, 332, 301, 334, 390]}
        ]
    })));
}

#[test]
fn scatter_on_value_axes() {
    insta::assert_snapshot!(draw(json!({
        "xAxis": {"scale": true, "name": "Price"},
        "yAxis": {"scale": true, "name": "Units"},
        "series": [
            {"name": "Shop A", "type": "scatter", "symbolSize": 14, "data": [[10.5, 200], [12, 180], [15.25, 90]]},
            {"name": "Shop B", "type": "scatter", "data": [[11, 150], [14, 120], [null, 3], {"value": [13, 140]}]}
        ]
    })));
}

#[test]
fn bars_and_a_line_from_a_dataset_of_objects() {
    insta::assert_snapshot!(draw(json!({
        "legend": {"show": true},
        "dataset": {"source": [
            {"region": "West", "sales": 10, "cost": 6},
            {"region": "East", "sales": 14, "cost": 9},
            {"region": "North", "sales": 7, "cost": 8}
        ]},
        "xAxis": {"type": "category"},
        "yAxis": {},
        "series": [{"type": "bar", "name": "Sales"}, {"type": "line", "name": "Cost"}]
    })));
}

#[test]
fn bars_on_a_value_axis_and_categories_from_pairs() {
    insta::assert_snapshot!(
        "bars_on_a_value_axis",
        draw(json!({
            "xAxis": {"type": "value"},
            "yAxis": {"type": "value"},
            "series": [{"type": "bar", "data": [[1, 5], [2, 3], [4, -2]]}]
        }))
    );
    insta::assert_snapshot!(
        "categories_from_pairs",
        draw(json!({
            "xAxis": {},
            "yAxis": {},
            "series": [
                {"type": "line", "data": [["b", 2], ["a", 1], ["c", 3]]},
                {"type": "bar", "data": [["a", 4], ["d", 5]]}
            ]
        }))
    );
}

#[test]
fn many_categories_skip_labels() {
    let labels: Vec<String> = (1..=60).map(|i| format!("Week {i}")).collect();
    let values: Vec<f64> = (1..=60).map(|i| f64::from(i * i % 97)).collect();
    insta::assert_snapshot!(draw(json!({
        "xAxis": {"type": "category", "data": labels},
        "yAxis": {},
        "series": [{"name": "Visits", "type": "line", "data": values}]
    })));
}

#[test]
fn pie_and_undrawn_kinds() {
    insta::assert_snapshot!(
        "pie",
        draw(json!({
            "title": {"text": "Share"},
            "legend": {},
            "series": [{"type": "pie", "radius": "60%", "data": [
                {"name": "A", "value": 5}, {"name": "B", "value": 3}, {"name": "C", "value": 0}
            ]}]
        }))
    );
    insta::assert_snapshot!(
        "undrawn",
        draw(json!({"title": {"text": "Flows"}, "series": [{"type": "sankey"}]}))
    );
}
