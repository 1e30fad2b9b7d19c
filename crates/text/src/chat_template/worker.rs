//! Rendering on a worker thread, so that the caller can stop waiting (for templates not rendered
//! in child processes, see [`super::process`]).
//!
//! The caller waits up to [`RenderLimits::deadline`](super::RenderLimits::deadline). A worker
//! it stops waiting for is detached: nothing joins it, so it cannot hold up shutdown, and its
//! fuel bounds how long it keeps running. Fuel does not cover everything minijinja can be made
//! to do (comparing or printing a list nested into itself many times walks it whole), so at
//! most [`MAX_LIVE_WORKERS`] workers exist at once: runaway templates can occupy that many
//! threads, never more.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use super::literal_spans::PromptText;
use super::{ChatMessage, ChatTemplate, ChatTemplateError};

/// Stack of the worker: minijinja's recursion limit is sized for a main thread's 8 MiB.
const STACK_BYTES: usize = 8 << 20;

/// The most render workers alive at once, in this process.
pub const MAX_LIVE_WORKERS: usize = 32;

/// Workers alive now.
static LIVE_WORKERS: AtomicUsize = AtomicUsize::new(0);

/// A slot among the [`MAX_LIVE_WORKERS`], given back when the worker ends.
struct WorkerSlot;

impl WorkerSlot {
    fn take() -> Option<Self> {
        LIVE_WORKERS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_LIVE_WORKERS).then_some(n + 1)
            })
            .ok()
            .map(|_| WorkerSlot)
    }
}

impl Drop for WorkerSlot {
    fn drop(&mut self) {
        LIVE_WORKERS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// [`ChatTemplate::render_with_spans`] on a worker thread, within the template's deadline.
pub(crate) fn render_with_deadline(
    template: &Arc<ChatTemplate>,
    messages: &[ChatMessage],
    tools: Option<serde_json::Value>,
    vars: serde_json::Map<String, serde_json::Value>,
    add_generation_prompt: bool,
) -> Result<PromptText, ChatTemplateError> {
    let deadline = template.limits().deadline;
    let slot = WorkerSlot::take().ok_or(ChatTemplateError::Busy {
        workers: MAX_LIVE_WORKERS,
    })?;
    let (send, receive) = mpsc::sync_channel(1);
    let worker_template = Arc::clone(template);
    let worker_messages = messages.to_vec();
    std::thread::Builder::new()
        .name("chat-template".into())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let _slot = slot;
            let result = worker_template.render_with_spans(
                &worker_messages,
                tools.as_ref(),
                &vars,
                add_generation_prompt,
            );
            // The caller may have stopped waiting; then the result has nowhere to go.
            let _ = send.send(result);
        })
        .map_err(|e| {
            ChatTemplateError::Render(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                format!("cannot start a thread to render the chat template: {e}"),
            ))
        })?;
    match receive.recv_timeout(deadline) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            Err(ChatTemplateError::TimedOut { after: deadline })
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(ChatTemplateError::Render(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                "the chat template's worker thread stopped without a result",
            )))
        }
    }
}
