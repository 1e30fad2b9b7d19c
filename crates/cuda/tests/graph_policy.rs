//! The decode graph's rules: capture once per cache and replay; any failure drops the graph so
//! the next request starts clean; a driver that cannot capture ends up on plain launches.

use rinfer_cuda::graph_policy::{DecodeGraph, MAX_CAPTURE_FAILURES, StepPlan};

#[test]
fn a_graph_is_captured_once_and_replayed_for_its_cache() {
    let mut g = DecodeGraph::<&str>::default();
    assert_eq!(g.plan(1), StepPlan::Capture);
    g.captured("graph", 1);
    assert_eq!(g.plan(1), StepPlan::Replay);
    assert_eq!(g.graph(), Some(&"graph"));
    // Another sequence's cache has other buffers: recapture for it.
    assert_eq!(g.plan(2), StepPlan::Capture);
}

#[test]
fn a_failed_request_leaves_no_graph_behind() {
    let mut g = DecodeGraph::<&str>::default();
    g.captured("graph", 1);
    g.invalidate();
    assert_eq!(g.graph(), None);
    assert_eq!(g.plan(1), StepPlan::Capture);
    assert_eq!(g.disabled_reason(), None);
}

#[test]
fn repeated_capture_failures_switch_to_plain_launches() {
    let mut g = DecodeGraph::<&str>::default();
    for _ in 1..MAX_CAPTURE_FAILURES {
        g.capture_failed("unsupported".into());
        assert_eq!(g.plan(1), StepPlan::Capture);
    }
    g.capture_failed("unsupported".into());
    assert_eq!(g.plan(1), StepPlan::Launch);
    assert_eq!(g.disabled_reason(), Some("unsupported"));
}

#[test]
fn a_successful_capture_resets_the_failure_count() {
    let mut g = DecodeGraph::<&str>::default();
    for _ in 1..MAX_CAPTURE_FAILURES {
        g.capture_failed("flaky".into());
    }
    g.captured("graph", 1);
    g.invalidate();
    g.capture_failed("flaky".into());
    assert_eq!(g.plan(1), StepPlan::Capture);
}
