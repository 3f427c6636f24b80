"""The one-process Python peer of the Kafka figure: Quix Streams with exactly-once doing the same selection
(parse the tick, keep price > 100) over the same pre-filled source topics on the same broker, writing the
selected ticks to a topic of its own. Run with the Quix venv's Python (`make quix-venv`), not the project's:

    .cache/quix-venv/bin/python bench/quix_peer.py BOOTSTRAP PREFIX TOTAL

Prints one JSON line: tuples, seconds (first record to the last one processed), tuples_per_s, selected.
"""

from __future__ import annotations

import json
import sys
import time
import uuid


def main(argv: list[str]) -> int:
    from quixstreams import Application

    bootstrap, prefix, total = argv[0], argv[1], int(argv[2])
    app = Application(broker_address=bootstrap, consumer_group=f"quix-{uuid.uuid4().hex[:8]}",
                      auto_offset_reset="earliest", processing_guarantee="exactly-once", loglevel="WARNING",
                      use_changelog_topics=False)
    out = app.topic(f"{prefix}quix-results", value_serializer="bytes")
    state = {"seen": 0, "selected": 0, "t0": 0.0, "t1": 0.0}

    def select(value: bytes) -> bool:
        if not state["t0"]:
            state["t0"] = time.monotonic()
        state["seen"] += 1
        fields = value.split(b",")
        keep = len(fields) == 5 and float(fields[1]) > 100
        state["selected"] += keep
        if state["seen"] >= total:
            state["t1"] = time.monotonic()
            app.stop()
        return keep

    for stream in ("I1", "I2"):
        topic = app.topic(f"{prefix}{stream}", value_deserializer="bytes")
        app.dataframe(topic).filter(select).to_topic(out)
    app.run()
    seconds = (state["t1"] or time.monotonic()) - state["t0"]
    print(json.dumps({"tuples": state["seen"], "seconds": round(seconds, 3),
                      "tuples_per_s": round(state["seen"] / seconds) if seconds else 0, "selected": state["selected"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
