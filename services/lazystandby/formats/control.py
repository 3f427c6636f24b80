"""The control record: an operator parameter change that travels in the link order like a tuple (stream id
0), so that N and N' switch at the same position (seed 003). Its payload is JSON
`{"predicate": "<an expression of formats/predicate.py>"}`; encoded, decoded and validated only here."""

from __future__ import annotations

import json

from ..core.errors import MalformedRecord, PredicateError
from .predicate import compile_predicate


def encode(predicate: str) -> bytes:
    """The control tuple that switches the predicate to `predicate` at its link position."""
    return json.dumps({"predicate": predicate}).encode()


def decode(payload: bytes) -> str:
    """The predicate a control record carries, compiled once to check it; MalformedRecord says why not."""
    try:
        text = json.loads(payload)["predicate"]
        if not isinstance(text, str):
            raise TypeError(f"predicate is a {type(text).__name__}, not a string")
        compile_predicate(text)
    except (ValueError, KeyError, TypeError, PredicateError) as e:
        raise MalformedRecord(f"control record refused: {e}") from None
    return text


def validate_control(payload: bytes) -> None:
    """Raise MalformedRecord unless `payload` is a control record the operators accept."""
    decode(payload)
