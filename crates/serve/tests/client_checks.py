"""What the client scripts share: checks counted and stopped at the first failure, and the
parameters of their weather tool.

The scripts import it from their own folder (Python puts a script's folder on `sys.path`).
"""

import sys

passed = 0


def check(condition, what):
    """Counts a passed check; exits non-zero naming `what` where `condition` is false."""
    global passed
    if not condition:
        sys.exit(f"FAILED: {what}")
    passed += 1


def weather(max_city):
    """The JSON schema of the weather tool's arguments, with city names up to `max_city`."""
    return {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": max_city},
            "unit": {"enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    }
