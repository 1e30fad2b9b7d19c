"""Tool calls through the official `openai` client, as applications use them.

Usage: python tools_client.py BASE_URL MODEL_ID MODE
MODE `full` also checks `auto` and a whole round trip (a model that can talk); `constrained`
checks only `required` and named calls (fixture models with random weights).
Exits non-zero with a message on the first check that fails.
"""

import json
import sys

import jsonschema
import openai

import client_checks
from client_checks import check

base_url, model, mode = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300)
WEATHER = client_checks.weather(20)
TIME = {
    "type": "object",
    "properties": {"zone": {"type": "integer", "minimum": -12, "maximum": 14}},
    "required": ["zone"],
    "additionalProperties": False,
}
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
TOOLS = [
    {"type": "function", "function": {"name": name, "description": f"{name} of a place", "parameters": schema}}
    for name, schema in SCHEMAS.items()
]
QUESTION = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


def check_calls(calls, only=None, single=False):
    check(calls, "no tool calls")
    if single:
        check(len(calls) == 1, f"{len(calls)} calls with parallel_tool_calls false")
    for call in calls:
        name = call["name"]
        check(name in SCHEMAS, f"called {name}")
        if only:
            check(name == only, f"called {name}, not {only}")
        jsonschema.validate(json.loads(call["arguments"]), SCHEMAS[name])


def finishes(parallel):
    # A random fixture model may go on adding parallel calls until `max_tokens`: the calls it
    # finished are returned, with `length`.
    return ("tool_calls", "length") if parallel and mode == "constrained" else ("tool_calls",)


def whole(choice, parallel, seed):
    r = client.chat.completions.create(
        model=model, messages=QUESTION, tools=TOOLS, tool_choice=choice,
        parallel_tool_calls=parallel, max_tokens=160, temperature=0.7, seed=seed,
    )
    c = r.choices[0]
    check(c.finish_reason in finishes(parallel), f"finish_reason {c.finish_reason}: {c.message}")
    return [{"id": t.id, "name": t.function.name, "arguments": t.function.arguments} for t in c.message.tool_calls]


def streamed(choice, parallel, seed):
    stream = client.chat.completions.create(
        model=model, messages=QUESTION, tools=TOOLS, tool_choice=choice,
        parallel_tool_calls=parallel, max_tokens=160, temperature=0.7, seed=seed, stream=True,
    )
    calls, finish = {}, None
    for chunk in stream:
        for choice_delta in chunk.choices:
            for t in choice_delta.delta.tool_calls or []:
                entry = calls.setdefault(t.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += t.id or ""
                entry["name"] += (t.function.name or "") if t.function else ""
                entry["arguments"] += (t.function.arguments or "") if t.function else ""
            finish = choice_delta.finish_reason or finish
    check(finish in finishes(parallel), f"streamed finish_reason {finish}")
    return [calls[i] for i in sorted(calls)]


named = {"type": "function", "function": {"name": "get_weather"}}
for seed in range(1 if mode == "full" else 2):
    for fetch in (whole, streamed):
        check_calls(fetch("required", True, seed))
        check_calls(fetch("required", False, seed), single=True)
        check_calls(fetch(named, False, seed), only="get_weather", single=True)

if mode == "full":
    # `auto`: text or calls, whichever the model chooses; calls are well formed either way.
    r = client.chat.completions.create(model=model, messages=QUESTION, tools=TOOLS, max_tokens=80, temperature=0)
    c = r.choices[0]
    if c.message.tool_calls:
        check_calls([{"name": t.function.name, "arguments": t.function.arguments} for t in c.message.tool_calls])
    else:
        check(isinstance(c.message.content, str), f"auto gave {c.message}")
    # A round trip: the call, its result, and the model's answer.
    call = whole(named, False, 0)[0]
    history = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"temperature": 18, "sky": "clear"})},
    ]
    r = client.chat.completions.create(model=model, messages=history, tools=TOOLS, tool_choice="none", max_tokens=40, temperature=0)
    check(r.choices[0].message.content, f"no answer after the tool result: {r.choices[0].message}")

print(f"openai client tool calls: {client_checks.passed} checks passed")
