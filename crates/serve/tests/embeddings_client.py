"""Embeddings through the official `openai` client: `embeddings.create` with a string, a list
of strings, token ids and lists of token ids (the client asks for base64 and decodes it),
explicit float, `dimensions`, usage, and a typed error.

Usage: python embeddings_client.py BASE_URL MODEL_ID REFS_JSON
Exits non-zero with a message on the first check that fails.
"""

import json
import math
import sys

import openai

import client_checks
from client_checks import check

base_url, model, refs_path = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300)
refs = json.load(open(refs_path))
cases = refs["cases"]


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


texts = [c["prompt"] for c in cases]
tokens = [c["tokens"] for c in cases]
for form, value in [("strings", texts), ("token arrays", tokens)]:
    for encoding in [openai.NOT_GIVEN, "float"]:
        result = client.embeddings.create(model=model, input=value, encoding_format=encoding)
        check(result.object == "list" and result.model == model, f"{form}: shape {result}")
        check(len(result.data) == len(cases), f"{form}: {len(result.data)} embeddings")
        total = sum(c["n_tokens"] for c in cases)
        check(result.usage.prompt_tokens == total, f"{form}: usage {result.usage}")
        for i, (item, case) in enumerate(zip(result.data, cases)):
            check(item.index == i and item.object == "embedding", f"{form}: item {i}")
            cos = cosine(item.embedding, case["embedding"])
            check(cos >= 0.999, f"{form} {encoding}: case {i} cosine {cos}")

one = client.embeddings.create(model=model, input=texts[0])
check(len(one.data) == 1 and len(one.data[0].embedding) == refs["n_embd"], "one string")
one_ids = client.embeddings.create(model=model, input=tokens[0])
check(len(one_ids.data) == 1, "one token array")
check(cosine(one.data[0].embedding, one_ids.data[0].embedding) > 0.99999, "text = its tokens")

short = client.embeddings.create(model=model, input=texts[0], dimensions=8)
check(len(short.data[0].embedding) == 8, "dimensions")
check(abs(math.hypot(*short.data[0].embedding) - 1) < 1e-5, "dimensions renormalised")

try:
    client.embeddings.create(model=model, input=texts[0], dimensions=100000)
    check(False, "dimensions over the width must fail")
except openai.BadRequestError as error:
    check(error.status_code == 400, f"status {error.status_code}")
    check(error.body.get("param") == "dimensions", f"param {error.body}")

print(f"{client_checks.passed} checks passed")
