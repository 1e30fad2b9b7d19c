//! The server as clients meet it, on a tiny fixture model: the OpenAI response shapes,
//! streaming, strict validation, limits, batching that does not change results and
//! cancellation.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};
use support::{long_request, open_stream, request, tiny_server, wait_for};

#[test]
fn completions_and_chat_answer_in_the_openai_shape() {
    let s = tiny_server(|_| {});
    let r = s.post(
        "/v1/completions",
        &json!({"model": "gemma3-tiny-q4_k_m", "prompt": "Hello", "max_tokens": 5, "temperature": 0}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    assert_eq!(body["object"], "text_completion");
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert!(body["choices"][0]["text"].is_string());
    assert_eq!(body["usage"]["completion_tokens"], 5);
    assert_eq!(
        body["usage"]["total_tokens"],
        body["usage"]["prompt_tokens"].as_u64().unwrap() + 5
    );

    let r = s.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                "max_completion_tokens": 3, "seed": 7, "logprobs": true, "top_logprobs": 2}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    let content = body["choices"][0]["logprobs"]["content"]
        .as_array()
        .unwrap();
    assert_eq!(content.len(), 3);
    assert_eq!(content[0]["top_logprobs"].as_array().unwrap().len(), 2);
    assert!(content[0]["logprob"].as_f64().unwrap() <= 0.0);

    // Streaming: chunks, a finish reason, the usage chunk, then [DONE].
    let r = s.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                "stream": true, "stream_options": {"include_usage": true}}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let events = r.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    let finish = &chunks[chunks.len() - 2]["choices"][0]["finish_reason"];
    assert_eq!(finish, "length");
    assert_eq!(chunks[chunks.len() - 1]["usage"]["completion_tokens"], 4);
    assert_eq!(chunks[chunks.len() - 1]["choices"], json!([]));

    // Streamed text is the non-streamed text.
    let ask = |stream: bool| {
        s.post(
            "/v1/completions",
            &json!({"prompt": [2, 100, 200, 300], "max_tokens": 12, "temperature": 0, "stream": stream}),
        )
    };
    let whole = ask(false).json()["choices"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let streamed: String = ask(true)
        .events()
        .iter()
        .filter(|e| *e != "[DONE]")
        .map(|e| {
            serde_json::from_str::<Value>(e).unwrap()["choices"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(whole, streamed);
}

#[test]
fn stop_strings_end_generation_and_are_not_returned() {
    let s = tiny_server(|_| {});
    let ask = |stop: Value| {
        s.post(
            "/v1/completions",
            &json!({"prompt": "Once upon", "max_tokens": 24, "temperature": 0, "stop": stop}),
        )
        .json()
    };
    let free = ask(Value::Null);
    let text = free["choices"][0]["text"].as_str().unwrap().to_string();
    // Stop at the third character of the free text: the answer is what comes before it.
    let cut: String = text.chars().skip(2).take(2).collect();
    let stopped = ask(json!([cut.clone()]));
    let expected = &text[..text.find(&cut).unwrap()];
    assert_eq!(
        stopped["choices"][0]["text"], expected,
        "stop {cut:?} in {text:?}"
    );
    assert_eq!(stopped["choices"][0]["finish_reason"], "stop");
}

#[test]
fn the_same_seed_gives_the_same_text_alone_or_beside_other_requests() {
    let s = tiny_server(|c| c.engine.sequences = 8);
    // Long enough (end-of-generation banned) that the eight overlap in the engine's batches.
    let body = |i: usize| {
        json!({"prompt": "Story number ".repeat(i + 1), "max_tokens": 300, "seed": i,
               "temperature": 0.9, "logit_bias": {"1": -100, "106": -100}})
    };
    let alone: Vec<Value> = (0..8)
        .map(|i| s.post("/v1/completions", &body(i)).json()["choices"][0]["text"].clone())
        .collect();
    let addr = s.addr;
    let together: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let b = body(i).to_string();
                scope.spawn(move || {
                    request(addr, "POST", "/v1/completions", b.as_bytes()).json()["choices"][0]
                        ["text"]
                        .clone()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(alone, together);
}

#[test]
fn malformed_requests_get_400_with_an_error_object_naming_the_field() {
    let s = tiny_server(|_| {});
    let post_raw = |path: &str, body: &[u8]| request(s.addr, "POST", path, body);
    // (body, expected param; None when the body as a whole is at fault)
    let corpus: &[(&str, Option<&str>)] = &[
        (r#"{"prompt": "a""#, None),
        (r#"[1, 2]"#, None),
        (r#""just a string""#, None),
        (r#"{"prompt": "a"} trailing"#, None),
        (r#"{"prompt": "a", "echo": true}"#, Some("echo")),
        (r#"{"prompt": "a", "best_of": 2}"#, Some("best_of")),
        (r#"{"prompt": "a", "suffix": "b"}"#, Some("suffix")),
        (r#"{"prompt": "a", "n": 0}"#, Some("n")),
        (r#"{"prompt": "a", "n": 17}"#, Some("n")),
        (r#"{"prompt": "a", "model": 5}"#, Some("model")),
        (
            r#"{"prompt": "a", "temperature": "hot"}"#,
            Some("temperature"),
        ),
        (r#"{"prompt": "a", "temperature": 3}"#, Some("temperature")),
        (r#"{"prompt": "a", "top_p": 0}"#, Some("top_p")),
        (r#"{"prompt": "a", "top_p": 1.5}"#, Some("top_p")),
        (r#"{"prompt": "a", "top_k": -1}"#, Some("top_k")),
        (r#"{"prompt": "a", "min_p": 2}"#, Some("min_p")),
        (r#"{"prompt": "a", "max_tokens": -5}"#, Some("max_tokens")),
        (r#"{"prompt": "a", "max_tokens": 0}"#, Some("max_tokens")),
        (r#"{"prompt": "a", "max_tokens": 1e3}"#, Some("max_tokens")),
        (
            r#"{"prompt": "a", "max_tokens": 100000}"#,
            Some("max_tokens"),
        ),
        (
            r#"{"prompt": "a", "max_tokens": 18446744073709551615}"#,
            Some("max_tokens"),
        ),
        (r#"{"prompt": "a", "stop": 5}"#, Some("stop")),
        (r#"{"prompt": "a", "stop": ["", "x"]}"#, Some("stop")),
        (
            r#"{"prompt": "a", "stop": ["a","b","c","d","e"]}"#,
            Some("stop"),
        ),
        (
            r#"{"prompt": "a", "presence_penalty": 9}"#,
            Some("presence_penalty"),
        ),
        (
            r#"{"prompt": "a", "frequency_penalty": "x"}"#,
            Some("frequency_penalty"),
        ),
        (
            r#"{"prompt": "a", "logit_bias": {"abc": 1}}"#,
            Some("logit_bias"),
        ),
        (
            r#"{"prompt": "a", "logit_bias": {"999999999": 1}}"#,
            Some("logit_bias"),
        ),
        (
            r#"{"prompt": "a", "logit_bias": {"5": 500}}"#,
            Some("logit_bias"),
        ),
        (r#"{"prompt": "a", "logprobs": true}"#, Some("logprobs")),
        (r#"{"prompt": "a", "logprobs": 50}"#, Some("logprobs")),
        (r#"{"prompt": "a", "seed": "x"}"#, Some("seed")),
        (r#"{"prompt": "a", "stream": "yes"}"#, Some("stream")),
        (
            r#"{"prompt": "a", "stream_options": {"include_usage": true}}"#,
            Some("stream_options"),
        ),
        (
            r#"{"prompt": "a", "stream": true, "stream_options": {"x": 1}}"#,
            Some("stream_options.x"),
        ),
        (r#"{"prompt": "a", "user": 5}"#, Some("user")),
        (r#"{"prompt": "a", "messages": []}"#, Some("messages")),
        (r#"{}"#, Some("prompt")),
        (r#"{"prompt": null}"#, Some("prompt")),
        (r#"{"prompt": 5}"#, Some("prompt")),
        (r#"{"prompt": []}"#, Some("prompt")),
        (r#"{"prompt": ["a", "b"]}"#, Some("prompt")),
        (r#"{"prompt": [1, "b"]}"#, Some("prompt")),
        (r#"{"prompt": [99999999]}"#, Some("prompt")),
        (r#"{"prompt": [-1]}"#, Some("prompt")),
        (r#"{"prompt": {"text": "a"}}"#, Some("prompt")),
    ];
    for (body, param) in corpus {
        let r = post_raw("/v1/completions", body.as_bytes());
        assert_eq!(r.status, 400, "{body} -> {}", r.text());
        assert_eq!(r.error_param().as_deref(), *param, "{body} -> {}", r.text());
    }
    let chat_corpus: &[(&str, &str)] = &[
        (r#"{"messages": "hi"}"#, "messages"),
        (r#"{"messages": []}"#, "messages"),
        (
            r#"{"prompt": "a", "messages": [{"role": "user", "content": "a"}]}"#,
            "prompt",
        ),
        (r#"{"messages": [{"role": "user"}]}"#, "messages[0].content"),
        (
            r#"{"messages": [{"role": "user", "content": "a", "audio": "x"}]}"#,
            "messages[0].audio",
        ),
        (
            r#"{"messages": [{"role": "tool", "content": "a"}]}"#,
            "messages[0].tool_call_id",
        ),
        (
            r#"{"messages": [{"role": "user", "content": 5}]}"#,
            "messages[0].content",
        ),
        (
            r#"{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}"#,
            "messages[0].content[0]",
        ),
        (
            r#"{"messages": [{"role": "user", "content": [{"type": "text"}]}]}"#,
            "messages[0].content[0]",
        ),
        (
            r#"{"messages": [{"role": "user", "content": [{"type": "text", "text": "a", "x": 1}]}]}"#,
            "messages[0].content[0].x",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "a"}], "tools": [], "tool_choice": "sometimes"}"#,
            "tool_choice",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "xml"}}"#,
            "response_format.type",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "a"}], "logprobs": 3}"#,
            "logprobs",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "a"}], "top_logprobs": 3}"#,
            "top_logprobs",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "a"}], "logprobs": true, "top_logprobs": 21}"#,
            "top_logprobs",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "a"}], "max_tokens": 5, "max_completion_tokens": 6}"#,
            "max_completion_tokens",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "a"}], "n": 5}"#,
            "n",
        ),
        (
            r#"{"messages": [{"role": "assistant", "content": "a"}]}"#,
            "messages",
        ),
    ];
    for (body, param) in chat_corpus {
        let r = post_raw("/v1/chat/completions", body.as_bytes());
        assert_eq!(r.status, 400, "{body} -> {}", r.text());
        assert_eq!(
            r.error_param().as_deref(),
            Some(*param),
            "{body} -> {}",
            r.text()
        );
    }
    for (path, body, param) in [
        ("/tokenize", r#"{"content": 5}"#, Some("content")),
        ("/tokenize", r#"{"text": "a"}"#, Some("text")),
        ("/detokenize", r#"{"tokens": [99999999]}"#, Some("tokens")),
        ("/detokenize", r#"{"tokens": "a"}"#, Some("tokens")),
        ("/detokenize", r#"{"#, None),
    ] {
        let r = post_raw(path, body.as_bytes());
        assert_eq!(r.status, 400, "{path} {body} -> {}", r.text());
        assert_eq!(
            r.error_param().as_deref(),
            param,
            "{path} {body} -> {}",
            r.text()
        );
    }
    // Invalid UTF-8 and binary noise.
    for body in [&b"\xff\xfe{}"[..], b"\x00\x01\x02", b""] {
        assert_eq!(post_raw("/v1/completions", body).status, 400);
    }
    assert_eq!(s.get("/v1/nothing").status, 404);
    assert_eq!(s.get("/v1/completions").status, 405);
    // After all of that the server still answers.
    let r = s.post("/v1/completions", &json!({"prompt": "a", "max_tokens": 2}));
    assert_eq!(r.status, 200);
}

#[test]
fn limits_are_refused_with_the_right_status() {
    let s = tiny_server(|c| {
        c.engine.sequences = 1;
        c.queue = 1;
        c.engine.context = Some(4096);
    });
    // Prompt plus max_tokens beyond the context: 400, never truncation.
    let long: String = (0..5000).map(|i| format!("w{i} ")).collect();
    let r = s.post("/v1/completions", &json!({"prompt": long, "max_tokens": 4}));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], "context_length_exceeded");
    let r = s.post(
        "/v1/completions",
        &json!({"prompt": "a", "max_tokens": 4095}),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.error_param().as_deref(), Some("max_tokens"));

    // A body over the limit: 413.
    let big = vec![b' '; 3 << 20];
    let r = request(s.addr, "POST", "/v1/completions", &big);
    assert_eq!(r.status, 413);
    r.error_param();

    // One running, one queued, the next one: 503 with Retry-After.
    let slow = long_request(true);
    let mut running = open_stream(s.addr, &slow);
    wait_for(|| s.metric("rinfer_running_sequences") == 1.0);
    let mut queued = open_stream(s.addr, &slow);
    wait_for(|| s.metric("rinfer_queue_depth") == 1.0);
    let r = s.post("/v1/completions", &json!({"prompt": "a", "max_tokens": 2}));
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.header("retry-after").is_some());
    r.error_param();
    drop_stream(&mut running);
    drop_stream(&mut queued);
    wait_for(|| s.metric("rinfer_running_sequences") == 0.0);
}

fn drop_stream(stream: &mut BufReader<TcpStream>) {
    let _ = stream.get_ref().shutdown(std::net::Shutdown::Both);
}

#[test]
fn a_client_that_disconnects_mid_stream_frees_its_slot() {
    let s = tiny_server(|c| {
        c.engine.sequences = 1;
        c.engine.context = Some(4096);
    });
    let body = long_request(true);
    let mut stream = open_stream(s.addr, &body);
    // Read until the first generated chunk arrives.
    let mut line = String::new();
    while !line.starts_with("data: ") {
        line.clear();
        stream.read_line(&mut line).unwrap();
    }
    assert_eq!(s.metric("rinfer_running_sequences"), 1.0);
    drop_stream(&mut stream);
    drop(stream);
    wait_for(|| s.metric("rinfer_running_sequences") == 0.0);
    assert_eq!(s.metric("rinfer_cancelled_total"), 1.0);
    assert_eq!(s.settled_metric("rinfer_kv_cache_used_positions", 0.0), 0.0);
    // Fewer than 4000 tokens were generated: the generation stopped, it did not run out.
    assert!(s.metric("rinfer_generated_tokens_total") < 4000.0);
    // The only slot serves the next request.
    let r = s.post("/v1/completions", &json!({"prompt": "a", "max_tokens": 3}));
    assert_eq!(r.status, 200);

    // The same for a non-streaming request whose client gives up (on a keep-alive connection,
    // as HTTP clients use: the server watches it for the next request and sees it close).
    let body = long_request(false);
    let mut waiting = TcpStream::connect(s.addr).unwrap();
    write!(
        waiting,
        "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut waiting = BufReader::new(waiting);
    wait_for(|| s.metric("rinfer_running_sequences") == 1.0);
    drop_stream(&mut waiting);
    wait_for(|| s.metric("rinfer_running_sequences") == 0.0);
    assert_eq!(s.metric("rinfer_cancelled_total"), 2.0);
}

#[test]
fn tokenize_models_health_and_metrics() {
    let s = tiny_server(|_| {});
    let tokens = s
        .post("/tokenize", &json!({"content": "Hello world"}))
        .json()["tokens"]
        .clone();
    assert_eq!(tokens[0], 2, "BOS first: {tokens}");
    let r = s.post(
        "/tokenize",
        &json!({"content": "Hello world", "add_special": false}),
    );
    let plain = r.json()["tokens"].as_array().unwrap().clone();
    let text = s.post("/detokenize", &json!({"tokens": plain})).json()["content"].clone();
    assert_eq!(text, "Hello world");

    let models = s.get("/v1/models").json();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "gemma3-tiny-q4_k_m");
    assert_eq!(s.get("/health").status, 200);

    s.post("/v1/completions", &json!({"prompt": "a", "max_tokens": 3}));
    s.post("/v1/completions", &json!({"prompt": "a", "n": 0}));
    // The engine counts a step's tokens and frees the slot just after sending the last one.
    s.settled_metric("rinfer_running_sequences", 0.0);
    s.settled_metric("rinfer_inter_token_latency_seconds_count", 2.0);
    let metrics = s.get("/metrics").text();
    for name in [
        "rinfer_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 1",
        "rinfer_requests_total{endpoint=\"/v1/completions\",status=\"400\"} 1",
        "rinfer_generated_tokens_total 3",
        "rinfer_time_to_first_token_seconds_count 1",
        "rinfer_inter_token_latency_seconds_count 2",
        "rinfer_queue_depth 0",
        "rinfer_running_sequences 0",
        "rinfer_kv_cache_usage_ratio 0",
    ] {
        assert!(metrics.contains(name), "{name} missing from\n{metrics}");
    }
}

/// A two-turn chat: the second request resends the first turn and its reply.
fn conversation(reply: Option<&str>) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a patient assistant who explains things."}),
        json!({"role": "user", "content": "Tell me about lighthouses."}),
    ];
    if let Some(reply) = reply {
        messages.push(json!({"role": "assistant", "content": reply}));
        messages.push(json!({"role": "user", "content": "And their keepers?"}));
    }
    json!({"messages": messages, "max_tokens": 6, "temperature": 0})
}

#[test]
fn a_resent_conversation_reports_its_cached_prompt_tokens_and_answers_as_if_cold() {
    let s = tiny_server(|c| c.engine.sequences = 1);
    let first = s.post("/v1/chat/completions", &conversation(None)).json();
    assert_eq!(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let reply = first["choices"][0]["message"]["content"].as_str().unwrap();
    let warm = s
        .post("/v1/chat/completions", &conversation(Some(reply)))
        .json();
    let first_prompt = first["usage"]["prompt_tokens"].as_u64().unwrap();
    let cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(
        cached >= first_prompt,
        "{cached} of the first {first_prompt} reused"
    );
    s.settled_metric("rinfer_running_sequences", 0.0);
    assert_eq!(
        s.metric("rinfer_prefix_cache_cached_tokens_total"),
        cached as f64
    );
    assert_eq!(s.metric("rinfer_prefix_cache_hits_total"), 1.0);
    assert!(s.metric("rinfer_prefix_cache_hit_rate") > 0.0);

    let cold = tiny_server(|c| c.engine.sequences = 1)
        .post("/v1/chat/completions", &conversation(Some(reply)))
        .json();
    assert_eq!(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(
        warm["choices"][0]["message"]["content"],
        cold["choices"][0]["message"]["content"]
    );
}

/// A prompt of more than two blocks of 16 tokens.
const LONG_PROMPT: &str = "The keeper of the lighthouse wrote in the log every evening: the wind, \
                           the sea, the ships that passed, the oil the lamp burned and the birds \
                           that rested on the gallery rail.";

#[test]
fn n_choices_sample_apart_and_share_the_prompts_blocks() {
    let s = tiny_server(|c| c.engine.sequences = 3);
    let body = json!({"prompt": LONG_PROMPT, "max_tokens": 6, "n": 3, "seed": 11,
                      "temperature": 1.5, "logit_bias": {"1": -100, "106": -100}});
    let r = s.post("/v1/completions", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    let choices = body["choices"].as_array().unwrap();
    let indexes: Vec<u64> = choices
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indexes, [0, 1, 2]);
    let texts: Vec<&str> = choices
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert!(
        texts[0] != texts[1] || texts[1] != texts[2],
        "each choice samples with its own seed: {texts:?}"
    );
    assert_eq!(body["usage"]["completion_tokens"], 18);
    // The prompt is counted once; the second and third choices reused its blocks.
    s.settled_metric("rinfer_running_sequences", 0.0);
    assert_eq!(s.metric("rinfer_prefix_cache_hits_total"), 2.0);
    assert!(s.metric("rinfer_prefix_cache_cached_tokens_total") >= 64.0);

    // Choice 1 is what seed 12 gives alone.
    let alone = s.post(
        "/v1/completions",
        &json!({"prompt": LONG_PROMPT, "max_tokens": 6, "seed": 12, "temperature": 1.5,
                "logit_bias": {"1": -100, "106": -100}}),
    );
    assert_eq!(alone.json()["choices"][0]["text"], texts[1]);

    // More choices than sequences run at once is refused.
    let r = s.post("/v1/completions", &json!({"prompt": "a", "n": 4}));
    assert_eq!((r.status, r.error_param()), (400, Some("n".to_string())));
}

#[test]
fn n_streamed_choices_each_open_and_finish_then_one_usage_chunk() {
    let s = tiny_server(|c| c.engine.sequences = 2);
    let r = s.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": LONG_PROMPT}], "max_tokens": 3,
                "n": 2, "stream": true, "stream_options": {"include_usage": true},
                "logit_bias": {"1": -100, "106": -100}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let events = r.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events
        .iter()
        .filter_map(|e| serde_json::from_str(e).ok())
        .collect();
    for index in 0..2 {
        let of = |c: &&Value| c["choices"][0]["index"] == index;
        let mine: Vec<&Value> = chunks.iter().filter(of).collect();
        assert_eq!(mine[0]["choices"][0]["delta"]["role"], "assistant");
        let finishes = mine
            .iter()
            .filter(|c| c["choices"][0]["finish_reason"].is_string())
            .count();
        assert_eq!(finishes, 1, "choice {index}");
    }
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"], 6);
}

#[test]
fn a_request_for_n_choices_waits_until_all_of_them_have_room() {
    let s = tiny_server(|c| {
        c.engine.sequences = 2;
        c.engine.context = Some(4096);
    });
    let mut long = open_stream(s.addr, &long_request(true));
    wait_for(|| s.metric("rinfer_running_sequences") == 1.0);
    let addr = s.addr;
    let body = json!({"prompt": "a", "max_tokens": 2, "n": 2}).to_string();
    let waiting =
        std::thread::spawn(move || request(addr, "POST", "/v1/completions", body.as_bytes()));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !waiting.is_finished(),
        "it started with room for one choice"
    );
    assert_eq!(s.metric("rinfer_running_sequences"), 1.0);
    drop_stream(&mut long);
    let r = waiting.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["choices"].as_array().unwrap().len(), 2);
}
