//! OpenAI-compatible HTTP serving for rinfer, with a continuous-batching scheduler.
//!
//! Nothing is implemented here yet. The engine must never run on the async runtime's threads.
