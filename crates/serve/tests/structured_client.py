"""Structured output through the official `openai` client, as applications use it.

Usage: python structured_client.py BASE_URL MODEL_ID API_KEY
Sends at least 50 constrained requests over several schemas; every answer must parse and
validate (with `jsonschema`). Exits non-zero with a message on the first check that fails.
"""

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, Optional

import jsonschema
import openai
import pydantic

base_url, model, key = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=300)


def fail(what):
    sys.exit(f"FAILED: {what}")


# Without the key: the client's own error type, from a 401.
try:
    openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
    fail("a wrong key was accepted")
except openai.AuthenticationError as e:
    if e.status_code != 401 or e.body.get("code") != "invalid_api_key":
        fail(f"unexpected 401 body {e.body}")

SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "nickname": {"type": "string", "maxLength": 8},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    "order": {
        "type": "object",
        "properties": {
            "customer": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 12},
                    "vip": {"type": "boolean"},
                },
                "required": ["city", "vip"],
                "additionalProperties": False,
            },
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"enum": ["apple", "pear", "plum"]},
                        "qty": {"type": "integer", "minimum": 1, "maximum": 9},
                    },
                    "required": ["sku", "qty"],
                    "additionalProperties": False,
                },
                "minItems": 1,
                "maxItems": 3,
            },
        },
        "required": ["customer", "items"],
        "additionalProperties": False,
    },
    "weather": {
        "type": "object",
        "properties": {
            "sky": {"enum": ["sunny", "cloudy", "rainy"]},
            "celsius": {"type": "integer", "minimum": -40, "maximum": 50},
            "windy": {"type": "boolean"},
        },
        "required": ["sky", "celsius"],
        "additionalProperties": False,
    },
    "tags": {
        "type": "array",
        "items": {"type": "string", "maxLength": 10},
        "minItems": 1,
        "maxItems": 4,
    },
}

PROMPTS = [
    "Describe a person as JSON.",
    "Give me an example in JSON.",
    "Make up some data.",
    "Reply with JSON only.",
]

MAX_TOKENS = 120


def chat_request(name, i):
    schema = SCHEMAS[name]
    r = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": True},
        },
        max_tokens=MAX_TOKENS,
        temperature=0.8,
        seed=i,
    )
    return name, r.choices[0].finish_reason, r.choices[0].message.content


def completion_request(name, i):
    # The client's `completions.create` has no `response_format` argument: it goes in the body.
    r = client.completions.create(
        model=model,
        prompt=f"{PROMPTS[i % len(PROMPTS)]}\n",
        max_tokens=MAX_TOKENS,
        temperature=0.8,
        seed=i,
        extra_body={
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": SCHEMAS[name]},
            }
        },
    )
    return name, r.choices[0].finish_reason, r.choices[0].text


jobs = []
for name in SCHEMAS:
    for i in range(9):
        jobs.append((chat_request, name, i))
    for i in range(4):
        jobs.append((completion_request, name, i))

with ThreadPoolExecutor(max_workers=4) as pool:
    results = list(pool.map(lambda job: job[0](job[1], job[2]), jobs))

valid = 0
for name, finish, text in results:
    if finish != "stop":
        fail(f"{name}: finish_reason {finish} for {text!r}")
    try:
        value = json.loads(text)
    except ValueError as e:
        fail(f"{name}: not JSON ({e}): {text!r}")
    try:
        jsonschema.validate(value, SCHEMAS[name])
    except jsonschema.ValidationError as e:
        fail(f"{name}: {e.message}: {text!r}")
    valid += 1

# json_object: any object.
for i in range(3):
    r = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Describe a cat as a JSON object."}],
        response_format={"type": "json_object"},
        max_tokens=MAX_TOKENS,
        temperature=0,
        seed=i,
    )
    content = r.choices[0].message.content
    if r.choices[0].finish_reason == "stop":
        if not isinstance(json.loads(content), dict):
            fail(f"json_object gave {content!r}")
        valid += 1
    elif not content.startswith("{"):
        fail(f"json_object cut at length but not an object's start: {content!r}")


# The client's own helper: a Pydantic model becomes a strict schema, the answer is parsed back.
class Pet(pydantic.BaseModel):
    kind: Literal["cat", "dog", "fish"]
    legs: int = pydantic.Field(ge=0, le=4)
    name: Optional[str] = pydantic.Field(max_length=10)


parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
for i in range(4):
    r = parse(
        model=model,
        messages=[{"role": "user", "content": "Describe a pet."}],
        response_format=Pet,
        max_tokens=MAX_TOKENS,
        temperature=0.8,
        seed=i,
    )
    if r.choices[0].finish_reason != "stop" or not isinstance(r.choices[0].message.parsed, Pet):
        fail(f"parse gave {r.choices[0].message.content!r}")
    valid += 1

if valid < 50:
    fail(f"only {valid} constrained answers checked")
print(f"{valid} constrained answers parsed and validated")
