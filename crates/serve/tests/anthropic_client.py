"""The Messages API through the official `anthropic` client: create, stream (the same text
as create for the same seed, events in Anthropic's order), tools with `tool_choice` `any` and
a named tool (whole and streamed, schema-valid input), a tool result round trip, count_tokens,
x-api-key, and errors in Anthropic's shape.

Usage: python anthropic_client.py BASE_URL MODEL_ID API_KEY
Exits non-zero with a message on the first check that fails.
"""

import json
import sys

import anthropic
import jsonschema

import client_checks
from client_checks import check

base_url, model, key = sys.argv[1], sys.argv[2], sys.argv[3]
client = anthropic.Anthropic(base_url=base_url, api_key=key, max_retries=0, timeout=300)
WEATHER = client_checks.weather(12)
TOOLS = [{"name": "get_weather", "description": "The weather in a city.", "input_schema": WEATHER}]
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
# `temperature` goes in the body as the API defines it (the SDK version may not name it).
SEED = {"seed": 7, "temperature": 1.0}

# create, and the same request streamed: the same text.
message = client.messages.create(
    model=model,
    max_tokens=24,
    system="You are brief.",
    messages=QUESTION,
    metadata={"user_id": "tester"},
    extra_body=SEED,
)
check(message.type == "message" and message.role == "assistant", f"message shape {message}")
check(message.stop_reason in ("end_turn", "max_tokens"), f"stop_reason {message.stop_reason}")
text = "".join(b.text for b in message.content if b.type == "text")
check(message.usage.output_tokens > 0, "output tokens counted")

names = []
with client.messages.stream(
    model=model,
    max_tokens=24,
    system="You are brief.",
    messages=QUESTION,
    extra_body=SEED,
) as stream:
    for event in stream:
        names.append(event.type)
    final = stream.get_final_message()
streamed = "".join(b.text for b in final.content if b.type == "text")
check(streamed == text, f"streamed {streamed!r} != whole {text!r}")
check(final.stop_reason == message.stop_reason, "same stop reason")
check(names[0] == "message_start", f"first event {names[:3]}")
check(names[-1] == "message_stop", f"last event {names[-3:]}")

# count_tokens agrees with the prompt the answer reports.
count = client.messages.count_tokens(model=model, system="You are brief.", messages=QUESTION)
prompt = message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0)
check(count.input_tokens == prompt, f"count_tokens {count.input_tokens} != usage {prompt}")

# Tools: `any` and a named tool force a schema-valid call, whole and streamed.
for choice in ({"type": "any"}, {"type": "tool", "name": "get_weather"}):
    request = dict(
        model=model,
        max_tokens=100,
        messages=QUESTION,
        tools=TOOLS,
        tool_choice=choice,
        extra_body=SEED,
    )
    reply = client.messages.create(**request)
    uses = [b for b in reply.content if b.type == "tool_use"]
    check(uses, f"no tool_use with {choice}: {reply.content}")
    # A random model may write new calls up to the limit; the whole ones are kept.
    check(reply.stop_reason in ("tool_use", "max_tokens"), f"stop_reason {reply.stop_reason}")
    for use in uses:
        check(use.name == "get_weather", use.name)
        jsonschema.validate(use.input, WEATHER)
    with client.messages.stream(**request) as stream:
        final = stream.get_final_message()
    streamed_uses = [b for b in final.content if b.type == "tool_use"]
    check(
        [(u.name, u.input) for u in streamed_uses] == [(u.name, u.input) for u in uses],
        f"streamed calls {streamed_uses} != whole {uses}",
    )

# The result of the call goes back as a tool_result block.
history = QUESTION + [
    {"role": "assistant", "content": [{"type": "tool_use", "id": uses[0].id, "name": uses[0].name, "input": uses[0].input}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": "18 C, sunny"}]},
]
reply = client.messages.create(model=model, max_tokens=8, messages=history, tools=TOOLS, extra_body=SEED)
check(reply.type == "message", "round trip answered")

# Errors come typed, in Anthropic's shape.
try:
    client.messages.create(model=model, max_tokens=0, messages=QUESTION)
    check(False, "max_tokens 0 accepted")
except anthropic.BadRequestError as e:
    check(e.body["type"] == "error", f"error body {e.body}")
    check(e.body["error"]["type"] == "invalid_request_error", f"error type {e.body}")
try:
    anthropic.Anthropic(base_url=base_url, api_key="wrong", max_retries=0).messages.create(
        model=model, max_tokens=4, messages=QUESTION
    )
    check(False, "a wrong key accepted")
except anthropic.AuthenticationError as e:
    check(e.body["error"]["type"] == "authentication_error", f"error type {e.body}")

print(f"{client_checks.passed} checks passed")
