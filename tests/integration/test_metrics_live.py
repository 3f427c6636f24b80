"""Metric names and labels scraped over HTTP from live node processes."""

import time
import urllib.request

from lazystandby.harness.launcher import Topology


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def test_every_node_serves_its_metrics(tmp_path):
    with Topology({"total": 5000, "rate": 5000.0}, tmp_path) as topo:
        topo.start_all()
        time.sleep(1.5)
        pages = {k: scrape(p) for k, p in topo.metrics_ports.items()}
    assert 'lazystandby_role{node="Nu",role="upstream"} 1.0' in pages["nu"]
    assert 'lazystandby_role{node="N",role="primary"} 1.0' in pages["n"]
    assert 'lazystandby_role{node="N\'",role="standby"} 1.0' in pages["n2"]
    assert 'lazystandby_role{node="Nd",role="downstream"} 1.0' in pages["nd"]
    for page in pages.values():
        for metric in ("lazystandby_tuples_total", "lazystandby_queue_depth", "lazystandby_epoch",
                       "lazystandby_rpc_errors_total"):
            assert metric in page
    delivered = [line for line in pages["nd"].splitlines()
                 if line.startswith('lazystandby_tuples_total{node="Nd",stage="delivered"}')]
    assert delivered and float(delivered[0].split()[-1]) > 0
