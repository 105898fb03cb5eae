"""Re-ask with feedback: the conversation sent after an answer failed validation.

At temperature 0 the identical request gives the identical wrong answer, so a re-ask sends the
planned messages, the rejected answer as the assistant's turn and a user turn naming each field
and the rule it broke. The conversation is built from the planned messages, the rejected text and
the validator's messages only (no time, no counter), so the same rejection always gives the same
re-ask; it keeps the row's request key, so its answer is cached under the row like any other.
Only the latest rejection is sent: a third attempt does not grow the conversation further.
"""

from __future__ import annotations

from collections.abc import Sequence

from batchor.schema.tools import CALL_CLOSING, is_call_violation

FEEDBACK_MAX_BYTES = 1000  # the feedback turn's UTF-8 length cap: no tokenizer makes more tokens than bytes
FEEDBACK_TOKENS = FEEDBACK_MAX_BYTES + 16  # what the plan allows per re-ask for it (two turns' overhead)
FEEDBACK_VIOLATIONS = 5  # violations named per re-ask; the rest are summed up
_OPENING = "Your previous answer was rejected:"
_CLOSING = "Answer again with valid JSON matching the schema, and nothing else."
EMPTY_ANSWER = "the answer is empty"  # a text step's violation (engine/recorder.judge)
_EMPTY_FEEDBACK = "Your previous answer was empty. Answer the request above; an empty answer is not accepted."


def feedback_text(violations: Sequence[str]) -> str:
    """The user turn after a rejected answer: what broke which rule, then the instruction."""
    named = [f"- {_describe(v)}" for v in violations[:FEEDBACK_VIOLATIONS]]
    if len(violations) > FEEDBACK_VIOLATIONS:
        named.append(f"- and {len(violations) - FEEDBACK_VIOLATIONS} more")
    body = "\n".join(named) or "- it does not match the schema"
    # A tool step's rejection asks for a call again (schema/tools.py), any other for JSON.
    closing = CALL_CLOSING if violations and all(is_call_violation(v) for v in violations) else _CLOSING
    room = FEEDBACK_MAX_BYTES - len(_OPENING) - len(closing) - 8
    if len(body.encode()) > room:
        body = body.encode()[:room].decode(errors="ignore") + "…"
    return f"{_OPENING}\n{body}\n{closing}"


def _describe(violation: str) -> str:
    """`$.rating_guess: 42 is greater than the maximum of 5` -> `` `rating_guess`: 42 is ... ``."""
    if violation.startswith("not valid JSON"):
        return "the answer is " + violation
    path, sep, rule = violation.partition(": ")
    if not sep or not path.startswith("$"):
        return violation
    field = path[1:].lstrip(".")
    return f"`{field}`: {rule}" if field else f"the answer as a whole: {rule}"


def reask_messages(
    messages: Sequence[dict[str, str]], rejected: str, violations: Sequence[str]
) -> tuple[dict[str, str], ...]:
    """The planned messages (without an earlier re-ask's turns), the rejected answer, the feedback."""
    planned = planned_messages(messages)
    if not rejected.strip():  # an empty text answer: no empty assistant turn (Anthropic refuses one)
        return (*planned, {"role": "user", "content": _EMPTY_FEEDBACK})
    return (
        *planned,
        {"role": "assistant", "content": rejected},
        {"role": "user", "content": feedback_text(violations)},
    )


def planned_messages(messages: Sequence[dict[str, str]]) -> tuple[dict[str, str], ...]:
    """The messages as rendered from the spec: everything before the first assistant turn
    (templates render only system and user turns)."""
    out: list[dict[str, str]] = []
    for message in messages:
        if message["role"] == "assistant":
            break
        out.append(message)
    return tuple(out)


def added_messages(messages: Sequence[dict[str, str]]) -> tuple[dict[str, str], ...]:
    """The turns a re-ask added to the planned messages (empty for a planned request)."""
    return tuple(messages[len(planned_messages(messages)) :])
