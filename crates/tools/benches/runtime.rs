//! Runtime overhead per call against calling the tool directly, and six concurrent 50 ms calls
//! against running them one after another.

use std::hint::black_box;
use std::time::Duration;

use ba_protocol::{InvocationContext, ToolCall};
use ba_tools::{
    CallContext, CallOptions, Tool, ToolRegistry, ToolRuntime, ToolsConfig, typed_tool,
};
use criterion::{Criterion, criterion_group, criterion_main};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct Args {
    n: u32,
}

fn runtime() -> ToolRuntime {
    let mut reg = ToolRegistry::new();
    let registered = reg
        .register(typed_tool(
            "noop",
            "Does nothing.",
            |a: Args, _| async move { Ok(json!({"n": a.n})) },
        ))
        .and_then(|()| {
            reg.register(typed_tool(
                "sleep50",
                "Sleeps 50 ms.",
                |a: Args, _| async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok(a.n)
                },
            ))
        });
    if let Err(e) = registered {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    match ToolRuntime::new(reg, ToolsConfig::default()) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}

fn tokio_rt() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}

/// Runs `call` once and exits when it fails: a bench of error results would time nothing real.
fn check(rt: &tokio::runtime::Runtime, runtime: &ToolRuntime, call: &ToolCall) {
    let result = rt.block_on(runtime.run(call, &InvocationContext::default()));
    if !result.success {
        eprintln!(
            "error: `{}` fails, so there is nothing to bench: {}",
            call.name, result.observation
        );
        std::process::exit(2);
    }
}

fn overhead(c: &mut Criterion) {
    let rt = tokio_rt();
    let runtime = runtime();
    let tool = runtime.registry().get("noop").map(|r| r.tool().clone());
    // Benching nothing would leave an empty row that reads as a result: fail instead.
    let Some(tool) = tool else {
        eprintln!("error: the tool `noop` is not in the registry; nothing to bench");
        std::process::exit(2);
    };
    let cctx = CallContext::detached("call_1");
    let ictx = InvocationContext::default();
    let call = ToolCall::new("call_1", "noop", json!({"n": 7}));
    check(&rt, &runtime, &call);
    let mut group = c.benchmark_group("tool_call_overhead");
    group.bench_function("baseline_direct_call", |b| {
        b.iter(|| rt.block_on(async { black_box(tool.call(json!({"n": 7}), &cctx).await) }))
    });
    group.bench_function("runtime_all_layers", |b| {
        b.iter(|| rt.block_on(async { black_box(runtime.run(&call, &ictx).await) }))
    });
    group.finish();
}

fn parallel(c: &mut Criterion) {
    let rt = tokio_rt();
    let runtime = runtime();
    let ictx = InvocationContext::default();
    let calls: Vec<ToolCall> = (0..6)
        .map(|i| ToolCall::new(format!("call_{i}"), "sleep50", json!({"n": i})))
        .collect();
    for call in &calls {
        check(&rt, &runtime, call);
    }
    let mut group = c.benchmark_group("six_calls_of_50ms");
    group.sample_size(10);
    group.bench_function("baseline_serial", |b| {
        b.iter(|| {
            rt.block_on(async {
                for call in &calls {
                    black_box(runtime.run(call, &ictx).await);
                }
            })
        })
    });
    group.bench_function("run_all_concurrent", |b| {
        b.iter(|| {
            rt.block_on(async {
                black_box(runtime.run_all(&calls, &ictx, CallOptions::default()).await)
            })
        })
    });
    group.finish();
}

criterion_group!(benches, overhead, parallel);
criterion_main!(benches);
