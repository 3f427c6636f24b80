"""A pipeline of several stages (formats/pipeline.py: CREATE VIEW ...), run and checked under a fault.

Each stage runs as a pipeline of its own, Nu, N, N' and Nd (a trial on a topology of its own, both made
by the launcher and driven here phase by phase): its Nd writes the view's topic, which the Nu of each
stage that reads the view reads as its source, as Kafka Streams chains its sub-topologies through
topics. A stage therefore fails over, backs up and trims on its own, and stages may fail at once.
Faults are named by stage: `kill-primary@2`, `kill-primary@1+2` (both stages' primaries at once); a
name without `@` hits stage 1; a campaign gives a fault per stage. Each stage is checked against the
truth of what it read (DuckDB over its source topics, harness/pipeline_check.py), the first stage's
being the load: the pipeline's output is exact when every stage's is.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Protocol

from ..config import pipeline_stages
from ..core.errors import SettingError
from ..formats.pipeline import Pipeline
from .faults import Fault, Runner, for_runner
from .places import NU
from .wait import wait_until

FAULTS = for_runner(Runner.PROCESSES)
# Keys of a stage's trial that a pipeline's summary sums over its stages.
SUMMED = ("lost", "duplicated", "wrong", "unexpected", "out_of_order", "late", "failovers", "takeovers_declined",
          "malformed", "dead_letters")
# Keys that hold of the pipeline when they hold of every stage.
ALL = ("ok", "completed", "delivered_all", "took_over", "settled", "dead_letters_exact", "late_exact",
       "late_letters_exact")
# Keys that describe a failover: the summary takes them from the stage whose failover took longest.
FAILOVER = ("recovery", "recovery_ms", "before", "after", "events", "standby_cpu_ratio", "predicted_recovery",
            "predicted_recovery_ms", "primary_longest_silence_ms", "takeover_lease_ms", "restarted", "exited")


def staged(name: str, stages: int, catalog: Mapping[str, Fault] = FAULTS) -> tuple[Fault, tuple[int, ...]]:
    """The fault of `catalog` (the process runner's by default) `name` names and the stages (from 1) it
    hits: NAME, NAME@K or NAME@K+L."""
    base, at, where = name.partition("@")
    if base not in catalog:
        raise SettingError(f"fault (--fault): expected one of {', '.join(sorted(catalog))}, optionally @STAGE, got "
                           f"{name!r}")
    if not at:
        return catalog[base], (1,)
    try:
        targets = tuple(sorted({int(k) for k in where.split("+")}))
    except ValueError:
        targets = ()
    if not targets or not all(1 <= k <= stages for k in targets):
        raise SettingError(f"fault (--fault): {name!r}: expected {base}@K or {base}@K+L with stages K, L in "
                           f"1..{stages} (the pipeline's stages)")
    return catalog[base], targets


def hits(fault: str | Fault | Mapping[int, Fault], stages: int) -> dict[int, Fault]:
    """The fault each stage hit gets (stage from 1): a name (`staged`), one fault (stage 1's), or a fault
    per stage (a campaign's pair across two stages)."""
    if isinstance(fault, str):
        f, at = staged(fault, stages)
        return dict.fromkeys(at, f)
    if isinstance(fault, Fault):
        return {1: fault}
    if not fault or not all(1 <= k <= stages for k in fault):
        raise SettingError(f"faults at stages {sorted(fault)}: the pipeline's stages are 1..{stages}")
    return dict(sorted(fault.items()))


def name_of(hit: Mapping[int, Fault]) -> str:
    """`kill-primary@2`, `kill-primary@1+2` (one fault at several stages), `a@1+b@3` (several)."""
    names = {f.name for f in hit.values()}
    if len(names) == 1:
        return f"{names.pop()}@{'+'.join(str(k) for k in hit)}"
    return "+".join(f"{f.name}@{k}" for k, f in hit.items())


def count(pipeline: str | None) -> int:
    """How many stages a pipeline file runs: 0 without one, 1 for a file that does not read (its error is
    the node settings' to say, in one line)."""
    if not pipeline:
        return 0
    try:
        return len(pipeline_stages(pipeline))
    except ValueError:
        return 1


def first_stage_args(pipeline: str | None) -> list[str]:
    """The node flag a pipeline's settings are checked with before a run: as its first stage's node takes
    them when the file has several (each stage's nodes then check their own)."""
    return ["--stage=1"] if count(pipeline) > 1 else []


class StageTrial(Protocol):
    """What run_stages drives for each stage (launcher._Trial): its phases, in order, and what they leave."""

    f: Fault
    ok: bool
    result: dict
    workdir: Path

    def start(self, topo) -> None: ...
    def reach_the_fault(self, topo) -> None: ...
    def inject(self, topo) -> None: ...
    def read_the_truth(self, topo) -> None: ...
    def settle(self, topo) -> None: ...
    def judge(self, topo) -> None: ...


def run_stages(specs: tuple[Pipeline, ...], fault: str | Fault | Mapping[int, Fault], *,
               trial: Callable[[int, Pipeline, Fault], StageTrial],
               topology: Callable[[StageTrial], AbstractContextManager], operator: str, timeout: float,
               home: Path, keep: bool) -> dict:
    """One trial of a pipeline of several stages under `fault`: `trial(k, spec, fault)` makes stage k's,
    `topology(trial)` its nodes. The result has run_trial's keys (the last stage's output and truth; lost,
    duplicated and wrong summed over the stages; the failover figures of the slowest stage hit) and
    `stages`, one summary per stage."""
    hit = hits(fault, len(specs))
    for f in hit.values():
        if why := f.unfit_for(operator):
            raise ValueError(why)
    trials = [trial(k, spec, hit.get(k, FAULTS["none"])) for k, spec in enumerate(specs, 1)]
    with ExitStack() as stack:
        runs = [(t, stack.enter_context(topology(t))) for t in trials]
        try:
            # The last stage first: the first one's load starts with it, and every reader is then up.
            for t, topo in reversed(runs):
                t.start(topo)
            for k, (t, topo) in enumerate(runs, 1):
                if k in hit:
                    _has_input(topo, timeout)
                    t.reach_the_fault(topo)
            # The stages hit at once, the others' figures from the same moment: a fault's steps may block
            # (a stop awaits the exit, a pause lasts past the detector's timeout), and in turn a double
            # fault across stages would be two faults one after the other.
            at_once([lambda t=t, topo=topo: t.inject(topo) for t, topo in runs])
            for t, topo in runs:  # in order: a stage's truth is what the stage writing its view delivered
                t.read_the_truth(topo)
                t.settle(topo)
            for t, topo in runs:
                t.judge(topo)
        finally:
            for t in trials:
                t.result["ok"] = t.ok
    result = combine([t.result for t in trials], tuple(hit))
    result.update(fault=fault if isinstance(fault, str) else name_of(hit), workdir=str(home))
    if result["ok"] and not keep:
        for t in trials:
            shutil.rmtree(t.workdir, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    else:
        result["workdirs"] = [str(t.workdir) for t in trials]
    return result


def at_once(calls: list[Callable[[], None]]) -> None:
    """Each call on a thread of its own, all started together and all awaited; then the first error any
    raised is raised."""
    errors: list[BaseException] = []

    def run(call: Callable[[], None]) -> None:
        try:
            call()
        except BaseException as e:  # noqa: BLE001 - raised again once every call has ended
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,), name=f"inject-{i}", daemon=True) for i, c in enumerate(calls)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


def _has_input(topo, timeout: float) -> None:
    """Wait until the stage's Nu has admitted a record: a later stage's input starts only when the stage
    writing its view delivers its first result (a window's, once the watermark passes the window's end)."""
    if not wait_until(lambda: topo.status(NU)["head"] > 0, timeout, step=0.05):
        raise RuntimeError(f"the stage's Nu admitted nothing in {timeout:.0f} s: the stage writing its view delivered "
                           f"no result")
    time.sleep(0.2)  # the fault hits a stage at work, not one that has just seen its first record


def combine(results: list[dict], at: tuple[int, ...]) -> dict:
    """A pipeline's trial result from its stages' (in order) and the stages its fault hit."""
    last = results[-1]
    hit = [results[k - 1] for k in at]
    slowest = max(hit, key=lambda r: r.get("recovery_ms", -1.0))
    out = {**last, **{k: slowest[k] for k in FAILOVER if k in slowest}}
    if "recovery_ms" not in slowest:
        out.pop("recovery_ms", None)
    out.update({k: sum(r.get(k, 0) for r in results) for k in SUMMED if any(k in r for r in results)})
    out.update({k: all(r.get(k, True) for r in results) for k in ALL if any(k in r for r in results)})
    out["stages"] = [_stage_summary(k, r, k in at) for k, r in enumerate(results, 1)]
    return out


def _stage_summary(k: int, r: dict, hit: bool) -> dict:
    return {"stage": k, "fault": r.get("fault", "none") if hit else "none", "expected_output": r.get("expected", 0),
            "output_tuples": r.get("got", 0), "lost": r.get("lost", 0), "duplicated": r.get("duplicated", 0),
            "wrong": r.get("wrong", 0), "failovers": r.get("failovers", 0),
            # A stage the fault did not hit may fail over all the same (its detector's timeout passed while a
            # takeover elsewhere held the cores): counted, with no time from a fault it did not have.
            "failover_ms": round(r["recovery_ms"], 1) if hit and "recovery_ms" in r else None,
            "ok": bool(r.get("ok")), **_at_fault(r)}


def _at_fault(r: dict) -> dict:
    """What weighs a stage's failover: the tuples its Nu had admitted when the fault hit (a paced standby
    holds them back), whether Nu then counted the standby in sync (out of sync, nothing holds the source
    for it), the times Nu counted it out of sync in the whole trial, and the longest its primary went
    unheard by Nd (past the detector's timeout, a live primary is taken over)."""
    nu_before, nu_after = (r.get("before") or {}).get(NU) or {}, (r.get("after") or {}).get(NU)
    # A node's counters leave out those never counted: a status read without it says 0, no status says None.
    out_of_sync = None if nu_after is None else (nu_after.get("counters") or {}).get("standby_out_of_sync", 0)
    return {"admitted_at_fault": nu_before.get("head"), "standby_in_sync_at_fault": nu_before.get("standby_in_sync"),
            "standby_out_of_sync": out_of_sync, "primary_longest_silence_ms": r.get("primary_longest_silence_ms")}
