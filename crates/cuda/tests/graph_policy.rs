//! The decode graphs' rules: capture once per cache and replay; sequences taking turns keep
//! their graphs; any failure drops the failing cache's graph so its next request starts clean;
//! a driver that cannot capture ends up on plain launches.

use rinfer_cuda::graph_policy::{DecodeGraph, MAX_CAPTURE_FAILURES, MAX_GRAPHS, StepPlan};

#[test]
fn a_graph_is_captured_once_and_replayed_for_its_cache() {
    let mut g = DecodeGraph::<&str>::default();
    assert_eq!(g.plan(1), StepPlan::Capture);
    g.captured("graph 1", 1);
    assert_eq!(g.plan(1), StepPlan::Replay);
    assert_eq!(g.graph(1), Some(&"graph 1"));
    // Another sequence's cache has other buffers: it gets its own graph.
    assert_eq!(g.plan(2), StepPlan::Capture);
    g.captured("graph 2", 2);
    assert_eq!((g.plan(1), g.plan(2)), (StepPlan::Replay, StepPlan::Replay));
    assert_eq!(g.graph(1), Some(&"graph 1"));
}

#[test]
fn the_least_recently_used_graph_is_dropped_first() {
    let mut g = DecodeGraph::<u64>::default();
    for cache in 0..MAX_GRAPHS as u64 {
        g.captured(cache, cache);
    }
    assert!(g.graph(0).is_some());
    g.captured(100, 100);
    assert_eq!(g.len(), MAX_GRAPHS);
    assert_eq!(g.plan(0), StepPlan::Replay);
    assert_eq!(g.plan(1), StepPlan::Capture);
}

#[test]
fn a_failed_request_leaves_no_graph_behind() {
    let mut g = DecodeGraph::<&str>::default();
    g.captured("graph 1", 1);
    g.captured("graph 2", 2);
    g.invalidate(1);
    assert_eq!(g.graph(1), None);
    assert_eq!(g.plan(1), StepPlan::Capture);
    assert_eq!(g.plan(2), StepPlan::Replay);
    assert_eq!(g.disabled_reason(), None);
}

#[test]
fn repeated_capture_failures_switch_to_plain_launches() {
    let mut g = DecodeGraph::<&str>::default();
    for _ in 1..MAX_CAPTURE_FAILURES {
        g.capture_failed(1, "unsupported".into());
        assert_eq!(g.plan(1), StepPlan::Capture);
    }
    g.capture_failed(1, "unsupported".into());
    assert_eq!(g.plan(1), StepPlan::Launch);
    assert!(g.is_empty());
    assert_eq!(g.disabled_reason(), Some("unsupported"));
}

#[test]
fn a_successful_capture_resets_the_failure_count() {
    let mut g = DecodeGraph::<&str>::default();
    for _ in 1..MAX_CAPTURE_FAILURES {
        g.capture_failed(1, "flaky".into());
    }
    g.captured("graph", 1);
    g.invalidate(1);
    g.capture_failed(1, "flaky".into());
    assert_eq!(g.plan(1), StepPlan::Capture);
}
