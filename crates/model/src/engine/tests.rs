//! The engine's failure handling, with a pass that panics on a poisoned token.

use super::*;
use crate::sampling::SamplingParams;

fn fixture() -> LoadedModel {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/models/gemma3-tiny-q4_k_m.gguf"
    );
    LoadedModel::open(path).unwrap()
}

/// Every sequence's events until all have ended: tokens of the finished, ids of the failed.
fn drain(engine: &mut Engine<'_>) -> (Vec<(SeqId, Vec<u32>)>, Vec<SeqId>) {
    let (mut finished, mut failed) = (Vec::new(), Vec::new());
    while engine.is_busy() {
        engine.step(|event| match event {
            Event::Finished { id, tokens, .. } => finished.push((id, tokens)),
            Event::Failed { id, .. } => failed.push(id),
            Event::Token { .. } | Event::Embedding { .. } => {}
        });
    }
    finished.sort_by_key(|(id, _)| *id);
    (finished, failed)
}

#[test]
fn a_pass_that_fails_ends_only_the_sequence_that_caused_it() {
    let loaded = fixture();
    let settings = EngineSettings::parallel(3, 64);
    let seeded = |seed| SamplingParams {
        seed,
        ..SamplingParams::default()
    };
    let poison = 7;
    let requests = [
        Request::new(vec![2, 10, 11, 12], 8).with_sampling(seeded(1)),
        Request::new(vec![2, 20, poison, 21], 8).with_sampling(seeded(2)),
        Request::new(vec![2, 30], 8).with_sampling(seeded(3)),
    ];

    let mut healthy = Engine::new(&loaded, settings, DeviceRequest::Cpu).unwrap();
    for r in [&requests[0], &requests[2]] {
        healthy.add(r.clone()).unwrap();
    }
    let (expected, _) = drain(&mut healthy);

    let mut faulty = Engine::new(&loaded, settings, DeviceRequest::Cpu).unwrap();
    let inner = std::mem::replace(
        &mut faulty.executor,
        Executor::Cpu {
            scratch: Box::new(crate::scratch::Scratch::new(&loaded.model.config, 1)),
        },
    );
    faulty.executor = Executor::Faulty {
        inner: Box::new(inner),
        poison,
    };
    let ids: Vec<SeqId> = requests
        .iter()
        .map(|r| faulty.add(r.clone()).unwrap())
        .collect();
    let (finished, failed) = drain(&mut faulty);
    assert_eq!(failed, vec![ids[1]]);
    let tokens =
        |list: &[(SeqId, Vec<u32>)]| list.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>();
    assert_eq!(tokens(&finished), tokens(&expected));
    assert!(faulty.has_room() && faulty.free.len() == 3);
}
