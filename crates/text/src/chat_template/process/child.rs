//! The render process's side: reads its template, then renders one job per line until its
//! parent closes the pipe.

use std::io::{self, BufRead, Write};
use std::sync::mpsc;

use super::super::{ChatTemplate, ChatTemplateError};
use super::wire::{Job, Reply, Setup};

/// Runs a render process: the body of the hidden command that [`super::RenderProcess`]
/// starts. Reads a setup line and then render jobs from stdin, one JSON line each, and answers
/// each job with one JSON line on stdout.
///
/// Before it compiles the template, the process caps its own address space at the limit the
/// setup names, so a template that builds data without bound ends this process (the parent
/// reports it), never the server. It exits as soon as stdin ends, even in the middle of a
/// render: a parent that exits or is killed takes its render processes with it.
///
/// # Errors
///
/// When the setup line is missing or malformed, or stdout is gone.
pub fn serve_renders() -> io::Result<()> {
    let (send, lines) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
        // The parent is gone (or closed the pipe): stop, whatever the renderer is doing.
        std::process::exit(0);
    });
    let setup: Setup = match lines.recv() {
        Ok(line) => serde_json::from_str(&line).map_err(io::Error::other)?,
        Err(_) => return Ok(()),
    };
    limit_address_space(setup.memory_limit_bytes)?;
    let template = ChatTemplate::new(&setup.source, &setup.bos, &setup.eos)
        .map_err(|e| io::Error::other(e.to_string()))?
        .with_limits(setup.limits());
    let mut out = io::stdout().lock();
    for line in lines {
        let reply = match serde_json::from_str::<Job>(&line) {
            Ok(job) => Reply::from_result(template.render_with_spans(
                &job.messages,
                job.tools.as_ref(),
                &job.vars,
                job.add_generation_prompt,
            )),
            Err(e) => Reply::from_result(Err(ChatTemplateError::Renderer(format!(
                "malformed render job: {e}"
            )))),
        };
        serde_json::to_writer(&mut out, &reply).map_err(io::Error::other)?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    Ok(())
}

#[cfg(unix)]
fn limit_address_space(bytes: u64) -> io::Result<()> {
    rlimit::Resource::AS.set(bytes, bytes)
}

#[cfg(not(unix))]
fn limit_address_space(_bytes: u64) -> io::Result<()> {
    Ok(())
}
