"""`python -m lazystandby.cli stack-check --bootstrap kafka:9092`: the truth-table check of a running
stack, from inside its network. Compares the results topic with the expected output rebuilt from the
source topics, and reads the new primary's recovery figures. Prints one JSON line."""

from __future__ import annotations

import argparse

from .. import config
from ..sinks.kafka_sink import read_results
from ..transport.grpc_transport import GrpcPeer
from ..transport.tls import TlsFiles
from . import results
from .check import compare, kafka_expected


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="lazystandby stack-check")
    ap.add_argument("--bootstrap", default="kafka:9092")
    ap.add_argument("--prefix", default="ls.")
    ap.add_argument("--predicate", default="price > 100")
    ap.add_argument("--status", default="", help="comma-separated name=host:port of nodes to read status from")
    ap.add_argument("--status-only", action="store_true", help="only the nodes' status, no truth-table check")
    a = ap.parse_args(argv)
    out: dict = {"nodes": {}}
    if not a.status_only:
        expected, malformed = kafka_expected(a.bootstrap, ["I1", "I2"], a.predicate, prefix=a.prefix)
        rows = read_results(a.bootstrap, f"{a.prefix}results")
        res = compare(expected, [(o, s, q) for o, s, q, _ in rows], per_stream_only=True)
        out.update({"expected": res.expected, "got": res.got, "lost": res.lost, "duplicated": res.duplicated,
                    "unexpected": res.unexpected, "out_of_order": res.out_of_order, "malformed": len(malformed),
                    "diff": res.diff[:3]})
    for item in filter(None, a.status.split(",")):
        name, addr = item.split("=", 1)
        peer = GrpcPeer(addr, tls=TlsFiles.from_config(config.load([])))  # this container's own certificate
        try:
            out["nodes"][name] = peer.status(3.0).snapshot
        except Exception as e:  # a node that is down is part of the picture
            out["nodes"][name] = {"error": str(e)[:200]}
        finally:
            peer.close()
    print(results.dumps("stack-check", out))
    return 0
