"""Nu's watermark placement rebuilt for the checks, apart from core/watermarks.py: where the records go
in the link order, the watermark each carries, and which inputs come too late. The truth tables of the
tick example (harness/check.py) and of a pipeline (harness/truth.py) both follow it.

The rule: inputs in admission order from link position `first`; a watermark record at every position
that is a multiple of `every`, carrying the least, over the streams (`known` from the start, the others
once heard from; none past `idle` positions without an input), of each one's largest event time before
it, never moving back; an input whose every window is final at the watermark in force is late (it takes
no position and moves no stream's time).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Placement:
    """`kept`: indices of the inputs that took a position, in order; `in_force`: the watermark in force
    at each of them (None before the first record); `marks`: every record's watermark, in order; `late`:
    indices of the late inputs."""

    kept: list[int] = field(default_factory=list)
    in_force: list[int | None] = field(default_factory=list)
    marks: list[int] = field(default_factory=list)
    late: list[int] = field(default_factory=list)


def place(times: list[int], *, size: int, slide: int, lateness: int, every: int, streams: list | None = None,
          known: tuple = (), idle: int = 0, first: int = 1) -> Placement:
    """The placement of inputs with event times `times` (ms) on `streams` (None: one stream) for windows of
    `size` ms sliding by `slide`, final `lateness` ms after their end."""
    out = Placement()
    pos, watermark = first, None
    # Per stream: its largest event time (None: not heard from yet) and the position of its last input.
    heard: dict = {k: [None, first - 1] for k in (known if streams is not None else (None,))}

    def allowed() -> int | None:
        tops = []
        for top, last in heard.values():
            if idle and pos - last > idle:
                continue
            if top is None:
                return None
            tops.append(top)
        return min(tops) if tops else None

    def records() -> None:
        nonlocal pos, watermark
        while pos % every == 0:
            watermark = max(allowed() or 0, watermark or 0)
            out.marks.append(watermark)
            pos += 1

    for i, t in enumerate(times):
        records()
        latest = t - t % slide
        if watermark is not None and latest + size + lateness <= watermark:
            out.late.append(i)
            continue
        h = heard.setdefault(streams[i] if streams is not None else None, [None, first - 1])
        h[0] = t if h[0] is None else max(h[0], t)
        h[1] = pos
        pos += 1
        out.kept.append(i)
        out.in_force.append(watermark)
    records()
    return out
