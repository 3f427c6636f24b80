"""The control record: an operator parameter change that travels in the link order like a tuple (stream id
0), so that N and N' act on it at the same position (seed 003). Two kinds, encoded, decoded and validated
only here:

- a predicate switch, JSON `{"predicate": "<an expression of formats/predicate.py>"}`;
- a watermark, JSON `{"watermark": <ms of event time>, "streams": {...}}`, which Nu places for a window
  query (core/watermarks.py): the event time the link order has passed at that position, and each
  stream's largest event time and last position there (what a restarted Nu resumes from; operators read
  only the watermark, always the first key). Window results are
  emitted there and nowhere else, so N and N' emit the same results with the same output numbers however
  their inputs were cut into calls.
"""

from __future__ import annotations

import json

from ..core.errors import MalformedRecord, PredicateError
from .predicate import compile_predicate


def encode(predicate: str) -> bytes:
    """The control tuple that switches the predicate to `predicate` at its link position."""
    return json.dumps({"predicate": predicate}).encode()


def encode_watermark(watermark: int, streams: dict[str, list] | None = None) -> bytes:
    """The control tuple that says the link order has passed event time `watermark` (ms), with the
    placer's per-stream state (`WatermarkPlacer.state`) when given."""
    if not streams:
        return b'{"watermark": %d}' % watermark
    return b'{"watermark": %d, "streams": %s}' % (watermark, json.dumps(streams, separators=(",", ":")).encode())


def watermark_state(payload: bytes | str) -> dict[str, list] | None:
    """The per-stream state a watermark record carries, None when it carries none (or is no record)."""
    if watermark_of(payload) is None:
        return None
    state = json.loads(payload).get("streams")
    ok = isinstance(state, dict) and all(isinstance(v, list) and len(v) == 2 for v in state.values())
    return state if ok else None


def watermark_of(payload: bytes | str) -> int | None:
    """The event time a watermark record carries, or None when `payload` is no watermark record. Cheap: a
    window operator asks it of every control record."""
    if isinstance(payload, str):  # as the Kafka link log keeps it
        payload = payload.encode()
    if not payload.startswith(b'{"watermark": '):
        return None
    try:
        value = json.loads(payload)["watermark"]
    except (ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


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
    """Raise MalformedRecord unless `payload` is a predicate switch the operators accept. (Watermark
    records are Nu's own: one from outside is refused, so that only Nu moves event time.)"""
    decode(payload)
