"""The Responses API through the official `openai` client: create, stream (the same text as
create for the same seed, events in OpenAI's order), function tools (required and named,
schema-valid arguments, whole and streamed), a function_call_output round trip through
previous_response_id, retrieve and delete, store false, and typed errors.

Usage: python responses_client.py BASE_URL MODEL_ID
Exits non-zero with a message on the first check that fails.
"""

import json
import sys

import jsonschema
import openai

import client_checks
from client_checks import check

base_url, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300)
WEATHER = client_checks.weather(12)
TOOLS = [{"type": "function", "name": "get_weather", "description": "The weather in a city.", "parameters": WEATHER}]
SEED = {"seed": 7}

# create, and the same request streamed: the same text.
first = client.responses.create(
    model=model,
    input="What is the weather in Paris?",
    instructions="You are brief.",
    max_output_tokens=24,
    temperature=1.0,
    metadata={"run": "test"},
    extra_body=SEED,
)
check(first.object == "response" and first.id.startswith("resp_"), f"response shape {first}")
check(first.status in ("completed", "incomplete"), f"status {first.status}")
check(first.usage.output_tokens > 0, "output tokens counted")
check(first.metadata == {"run": "test"}, f"metadata {first.metadata}")
text = first.output_text

def final_of(stream):
    """The response of the last event: `response.completed`, or `response.incomplete` when
    `max_output_tokens` ran out (as OpenAI's API sends it; the SDK's `get_final_response`
    knows only the first)."""
    last = None
    for event in stream:
        names.append(event.type)
        last = event
    check(last.type in ("response.completed", "response.incomplete"), f"last event {last.type}")
    return last.response


names = []
with client.responses.stream(
    model=model,
    input="What is the weather in Paris?",
    instructions="You are brief.",
    max_output_tokens=24,
    temperature=1.0,
    extra_body=SEED,
) as stream:
    final = final_of(stream)
check(final.output_text == text, f"streamed {final.output_text!r} != whole {text!r}")
check(names[0] == "response.created", f"first events {names[:2]}")
if text:
    check("response.output_text.delta" in names, f"no text deltas in {names}")

# retrieve, continue, delete.
got = client.responses.retrieve(first.id)
check(got.id == first.id and got.output_text == text, "retrieve gives the stored response")

# Tools: required and named calls are schema-valid, whole and streamed.
for choice in ("required", {"type": "function", "name": "get_weather"}):
    request = dict(
        model=model,
        input="What is the weather in Paris?",
        tools=TOOLS,
        tool_choice=choice,
        max_output_tokens=100,
        extra_body=SEED,
    )
    reply = client.responses.create(**request)
    calls = [o for o in reply.output if o.type == "function_call"]
    check(calls, f"no function_call with {choice}: {reply.output}")
    for call in calls:
        check(call.name == "get_weather", call.name)
        jsonschema.validate(json.loads(call.arguments), WEATHER)
    with client.responses.stream(**request) as stream:
        final = final_of(stream)
    streamed = [(o.name, o.arguments) for o in final.output if o.type == "function_call"]
    check(streamed == [(c.name, c.arguments) for c in calls], f"streamed calls {streamed}")

# The call's output goes back through previous_response_id.
follow = client.responses.create(
    model=model,
    previous_response_id=reply.id,
    input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 C, sunny"}],
    tools=TOOLS,
    max_output_tokens=8,
    extra_body=SEED,
)
check(follow.previous_response_id == reply.id, "the continuation names its predecessor")
check(follow.usage.input_tokens > reply.usage.input_tokens, "the continuation's prompt holds the earlier turn")

deleted = client.responses.delete(first.id)
try:
    client.responses.retrieve(first.id)
    check(False, "a deleted response is still there")
except openai.NotFoundError:
    client_checks.passed += 1

# store false: nothing to retrieve or continue.
unstored = client.responses.create(model=model, input="Hi", max_output_tokens=4, store=False, extra_body=SEED)
try:
    client.responses.create(model=model, input="Again", previous_response_id=unstored.id, max_output_tokens=4)
    check(False, "continued a response that was not stored")
except openai.NotFoundError:
    client_checks.passed += 1

try:
    client.responses.create(model=model, input="Hi", max_output_tokens=4, extra_body={"background": True})
    check(False, "an unknown field accepted")
except openai.BadRequestError as e:
    check("background" in str(e), f"error {e}")

print(f"{client_checks.passed} checks passed")
