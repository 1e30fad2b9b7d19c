"""Drives the server with the official `openai` Python client, as users do.

Usage: python openai_client.py BASE_URL MODEL_ID
Exits non-zero with a message on the first check that fails.
"""

import sys

import openai

import client_checks
from client_checks import check

base_url, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300)
ids = [m.id for m in client.models.list()]
check(ids == [model], f"models.list() gives {ids}")

question = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]

# Chat, not streamed.
chat = client.chat.completions.create(model=model, messages=question, max_tokens=16, temperature=0)
answer = chat.choices[0].message.content
check(isinstance(answer, str) and answer.strip(), f"chat answer {answer!r}")
check(chat.choices[0].finish_reason in ("stop", "length"), "chat finish_reason")
check(chat.usage.prompt_tokens > 0 and chat.usage.completion_tokens > 0, f"chat usage {chat.usage}")
check(chat.usage.total_tokens == chat.usage.prompt_tokens + chat.usage.completion_tokens, "total")

# Chat, streamed with usage: the same greedy text.
stream = client.chat.completions.create(
    model=model, messages=question, max_tokens=16, temperature=0,
    stream=True, stream_options={"include_usage": True},
)
pieces, usage, finish = [], None, None
for chunk in stream:
    if chunk.usage is not None:
        usage = chunk.usage
    for choice in chunk.choices:
        if choice.delta.content:
            pieces.append(choice.delta.content)
        if choice.finish_reason:
            finish = choice.finish_reason
check("".join(pieces) == answer, f"streamed chat {''.join(pieces)!r} != {answer!r}")
check(finish == chat.choices[0].finish_reason, "streamed finish_reason")
check(usage is not None and usage.completion_tokens == chat.usage.completion_tokens, f"stream usage {usage}")

# Chat with log-probabilities.
chat = client.chat.completions.create(
    model=model, messages=question, max_tokens=4, temperature=0, logprobs=True, top_logprobs=3,
)
content = chat.choices[0].logprobs.content
check(len(content) == chat.usage.completion_tokens, "one logprob entry per token")
check(all(len(c.top_logprobs) == 3 and c.logprob <= 0 for c in content), "top_logprobs")
# Greedy: the chosen token is the most likely one.
check(all(c.token == c.top_logprobs[0].token for c in content), "greedy picks the top token")

# Completions, not streamed and streamed.
prompt = "The capital of France is"
done = client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0, seed=1)
text = done.choices[0].text
check(isinstance(text, str) and text, f"completion text {text!r}")
check(done.usage.completion_tokens <= 8, "completion usage")
streamed = "".join(
    c.choices[0].text
    for c in client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0, stream=True)
    if c.choices
)
check(streamed == text, f"streamed completion {streamed!r} != {text!r}")

# Sampling with a seed is reproducible.
a = client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=1.0, seed=42)
b = client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=1.0, seed=42)
check(a.choices[0].text == b.choices[0].text, "same seed, same text")

# Stop strings.
stopped = client.completions.create(
    model=model, prompt="1, 2, 3, 4,", max_tokens=16, temperature=0, stop=[" 7"],
)
check(" 7" not in stopped.choices[0].text, f"stop string returned: {stopped.choices[0].text!r}")

# Unsupported and invalid requests raise the client's typed errors.
try:
    client.chat.completions.create(model=model, messages=question, n=17)
    check(False, "n=17 accepted")
except openai.BadRequestError as e:
    check(e.status_code == 400 and "n" == e.body.get("param"), f"n=17 error {e.body}")
try:
    client.chat.completions.create(model="gpt-4o", messages=question)
    check(False, "unknown model accepted")
except openai.NotFoundError as e:
    check(e.status_code == 404 and e.body.get("code") == "model_not_found", f"unknown model error {e.body}")
try:
    client.chat.completions.create(model=model, messages=question, tools=[], tool_choice="required")
    check(False, "a required call without tools accepted")
except openai.BadRequestError as e:
    check(e.body.get("param") == "tool_choice", f"tool_choice error {e.body}")

print(f"openai client: {client_checks.passed} checks passed; chat answer {answer!r}")
