"""One test body, two transports: the in-memory twin here and real gRPC on loopback (integration tier
runs the same functions with transport="grpc")."""

import random
import threading
import time
from concurrent.futures import Future

import pytest

from lazystandby.core.errors import SourceGap
from lazystandby.formats import control
from lazystandby.harness.check import compare, expected_outputs
from lazystandby.harness.inprocess import InProcessTopology
from lazystandby.operators.selection import Selection
from lazystandby.sources.base import GeneratorSource

NAMES = {1: "I1", 2: "I2"}


def output(topo):
    return [(o, NAMES[s], q) for o, s, q, _ in topo.sink.rows]


def expected(total, predicate="price > 100"):
    return expected_outputs(["I1", "I2"], seed=7, total=total, predicate=predicate)


def body_no_failure(transport):
    with InProcessTopology(transport, total=5000, rate=0.0, bsize="10") as t:
        exp = expected(5000)
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= len(exp))
        assert t.wait(lambda: t.nodes["nu"].outbound.oqu.trimmed_through == 5000), "Level-1 acks must trim all of OQu"
        assert compare(exp, output(t)).ok
        # The standby is caught up; positions that Level-1 acks trimmed before they were batched it skips
        # through a checkpoint jump instead of receiving them.
        n2 = t.nodes["n2"]
        assert t.wait(lambda: n2.inbound.received_through == 5000)
        assert n2.counters["backup_tuples"] > 0
        assert n2.counters["backup_tuples"] == 5000 or n2.counters["jumps"] > 0


def body_kill_primary(transport, bsize, codec="zstd-stream-dict"):
    total = 20_000
    with InProcessTopology(transport, total=total, rate=20_000.0, bsize=bsize, codec=codec) as t:
        exp = expected(total)
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through > 2000)
        t.kill("n")
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= len(exp), 30)
        res = compare(exp, output(t))
        assert res.ok, res
        assert t.nodes["n2"].state.role == "primary" and t.nodes["n2"].state.epoch == 2
        assert t.nodes["nd"].counters["duplicates_dropped"] == 0  # Precise: nothing sent twice
        return t.nodes["n2"].takeover.recovery


def test_no_failure_memory():
    body_no_failure("memory")


@pytest.mark.parametrize("bsize", ["1", "10", "inf"])
def test_kill_primary_memory(bsize):
    rec = body_kill_primary("memory", bsize)
    if bsize == "inf":
        assert rec["replayed_from_oq"] == 0


def test_selection_of_one_percent_still_trims_upstream():
    """Acks cover dropped inputs: with almost nothing selected, OQu must still empty."""
    one_percent = "symbol = 'ACME' AND volume >= 4500"
    with InProcessTopology("memory", total=8000, rate=0.0, bsize="inf", predicate=one_percent) as t:
        assert t.wait(lambda: t.nodes["nu"].outbound.oqu.trimmed_through == 8000)
        assert 0 < len(t.sink.rows) < 0.02 * 8000


def test_backpressure_bounds_upstream_when_acks_stall():
    """Bsize inf and Nd gone: OQu fills to its capacity and the source waits; nothing grows past it."""
    with InProcessTopology("memory", total=0, rate=0.0, bsize="inf", oq_capacity=5000) as t:
        t.kill("nd")
        assert t.wait(lambda: t.nodes["nu"].counters["source_blocked"] > 0, 10)
        nu = t.nodes["nu"]
        assert len(nu.outbound.oqu) <= 5000 and nu.outbound.oqu.last <= 5000 + nu.outbound.oqu.trimmed_through


class _GapAfter(GeneratorSource):
    """The generator, until the broker has deleted what comes after `n` tuples."""

    def __init__(self, n: int) -> None:
        super().__init__(["I1", "I2"], total=0, rate=0.0)
        self.n = n

    def poll(self, max_records):
        if self._n >= self.n:
            raise SourceGap(f"I1 from seq {self.n // 2 + 1} deleted")
        return super().poll(min(max_records, self.n - self._n))


def test_a_source_gap_stops_admission_and_everything_before_it_is_delivered():
    with InProcessTopology("memory", source=_GapAfter(3000), bsize="10") as t:
        nu = t.nodes["nu"]
        assert t.wait(lambda: nu.counters["source_gaps"] == 1, 10)
        assert t.wait(lambda: nu.outbound.oqu.trimmed_through == 3000, 20)  # all of it processed and acknowledged
        time.sleep(0.3)
        assert nu.outbound.oqu.last == 3000 and nu.counters["source_gaps"] == 1  # nothing admitted after, asked once
        assert "I1 from seq 1501" in nu.snapshot()["source_gap"]
        exp = expected_outputs(["I1", "I2"], seed=7, total=3000, predicate="price > 100")
        assert compare(exp, output(t)).ok


def test_an_oq_smaller_than_one_operator_call_does_not_livelock_through_a_pause_of_nd():
    """N's operator takes up to 32,768 inputs a call; with room for 300 outputs in OQ, a call sized to
    the room left keeps going (a call whose outputs could never fit once spun for ever)."""
    total = 6000
    t = InProcessTopology("memory", total=total, rate=0.0, predicate="price > 0")
    t.nodes["n"].oq.capacity = 300  # N's OQ only: Nu still sends frames of up to 4,096 tuples
    with t:
        exp = expected(total, "price > 0")
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through > 500)
        t.net.down("nd")  # Nd paused: nothing acked, OQ fills
        time.sleep(0.3)
        assert t.nodes["n"].oq.room() == 0 or t.nodes["n"].counters["oq_full_waits"] > 0
        t.net.up("nd")
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= len(exp), 30)
        assert compare(exp, output(t)).ok


class Pipelined(Selection):
    """A Selection whose answers arrive later and out of order, as a pipelined engine's may: the node
    must still number and deliver outputs in input order, on N and N' alike."""

    in_flight_max = 6_000

    def __init__(self, predicate):
        super().__init__(predicate)
        self.rng = random.Random(11)
        self.most_in_flight = 0
        self._pending = 0
        self._lock = threading.Lock()

    def submit(self, batch):
        result = self.process(batch)  # decided now, in input order: a control tuple switches at its position
        fut = Future()

        def answer():
            with self._lock:
                self._pending -= len(batch)
            fut.set_result(result)

        with self._lock:
            self._pending += len(batch)
            self.most_in_flight = max(self.most_in_flight, self._pending)
        threading.Timer(self.rng.uniform(0.0, 0.03), answer).start()
        return fut


@pytest.mark.parametrize("kill", [False, True])
def test_a_pipelined_operator_answering_out_of_order_keeps_the_output_exact(kill):
    total = 20_000
    with InProcessTopology("memory", total=total, rate=20_000.0, bsize="10", operator_batch=500,
                           operator=Pipelined) as t:
        exp = expected(total)
        if kill:
            assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through > 2000)
            t.kill("n")
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= len(exp), 30)
        res = compare(exp, output(t))
        assert res.ok, res
        live = t.nodes["n2" if kill else "n"]
        assert live.operator.most_in_flight > 500, "several calls were in flight at once"
        assert live.operator.most_in_flight <= Pipelined.in_flight_max
        assert t.nodes["nd"].counters["duplicates_dropped"] == 0


def test_a_pipelined_operator_s_bound_holds_for_a_first_call_from_one_big_frame():
    """At full speed Nu's frames (frame_max 32,768) outsize the operator's bound (6,000): the first call,
    made with nothing in flight, is cut to the bound like every other."""
    total = 60_000
    with InProcessTopology("memory", total=total, rate=0.0, bsize="10", operator=Pipelined) as t:
        exp = expected(total)
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= len(exp), 60)
        assert compare(exp, output(t)).ok
        assert 0 < t.nodes["n"].operator.most_in_flight <= Pipelined.in_flight_max


class Lazy(Selection):
    """A standby's engine that answers late while lazy (held up to 5 s, as a paced Spark feed holds the
    backup) and answers everything at once when the node turns lazy off."""

    in_flight_max = 6_000
    HOLD = 5.0

    def __init__(self, predicate):
        super().__init__(predicate)
        self.lazy_calls: list[bool] = []
        self._on = False
        self._held: list[tuple[Future, object]] = []
        self._lock = threading.Lock()

    def submit(self, batch):
        result, fut = self.process(batch), Future()
        with self._lock:
            if self._on:
                self._held.append((fut, result))
                if len(self._held) == 1:
                    threading.Timer(self.HOLD, self._release).start()
                return fut
        fut.set_result(result)
        return fut

    def _release(self):
        with self._lock:
            held, self._held = self._held, []
        for fut, result in held:
            fut.set_result(result)

    def lazy(self, on):
        self.lazy_calls.append(on)
        with self._lock:
            self._on = on
        if not on:
            self._release()


def test_a_standby_is_lazy_until_it_takes_over_and_then_answers_at_once():
    total = 20_000
    with InProcessTopology("memory", total=total, rate=10_000.0, bsize="10", operator_batch=500,
                           standby_defer=0, operator=Lazy) as t:
        exp = expected(total)
        n, n2 = t.nodes["n"], t.nodes["n2"]
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through > 4000)
        assert n.operator.lazy_calls == [] and n2.operator.lazy_calls == [True]
        assert t.wait(lambda: n2.calls.in_flight_tuples > 0), "the standby holds answers back"
        t.kill("n")
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= len(exp), 30)
        res = compare(exp, output(t))
        assert res.ok, res
        assert n2.operator.lazy_calls == [True, False]
        assert n2.takeover.recovery["catch_up_ms"] < 0.5 * Lazy.HOLD * 1000, "the takeover did not wait out the hold"


class Sluggish(Selection):
    """A standby's engine slower than the input: while lazy (a standby), it answers 5,000 tuples/s, calls one
    after the other, as Spark's micro-batches on a busy machine."""

    in_flight_max = 2_000
    RATE = 5_000.0

    def __init__(self, predicate):
        super().__init__(predicate)
        self._on = False
        self._due = 0.0
        self._lock = threading.Lock()

    def submit(self, batch):
        result, fut = self.process(batch), Future()
        with self._lock:
            if not self._on:
                fut.set_result(result)
                return fut
            self._due = max(time.monotonic(), self._due) + len(batch) / self.RATE
            delay = self._due - time.monotonic()
        threading.Timer(delay, fut.set_result, [result]).start()
        return fut

    def lazy(self, on):
        with self._lock:
            self._on = on


@pytest.mark.parametrize("switch", [False, True])
def test_a_standby_that_falls_behind_skips_what_nd_holds_and_takes_over_exactly(switch):
    """The standby's operator runs at half the input rate. It skips the inputs a Level-1 checkpoint covers
    instead of working through them, so its lag stays bounded (without the skip it would be 15,000 tuples
    behind when N dies); a control tuple inside the skipped inputs still switches it at its position."""
    total, new = 40_000, "price > 60 AND volume >= 1000"
    with InProcessTopology("memory", total=total, rate=10_000.0, bsize="10", operator_batch=500,
                           standby_defer=0, operator=Sluggish) as t:
        nu, n, n2, nd = (t.nodes[k] for k in ("nu", "n", "n2", "nd"))
        if switch:
            assert t.wait(lambda: n.processed.input_pos > 5_000)
            nu.inject_control(control.encode(new))
            assert t.wait(lambda: n.operator.switches and n2.processed.input_pos > n.operator.switches[0][0])
        assert t.wait(lambda: n.processed.input_pos > 25_000)
        lag = n2.standby_side.primary_received - n2.processed.input_pos
        assert n2.counters["skipped_tuples"] > 0
        assert lag < 10_000, f"the standby is {lag} tuples behind"
        t.kill("n")
        exp = expected_outputs(["I1", "I2"], seed=7, total=total, predicate="price > 100",
                               switch=(n.operator.switches[0][0], new) if switch else None)
        assert t.wait(lambda: nd.inbound.delivered_through >= len(exp), 30)
        res = compare(exp, output(t))
        assert res.ok, res
        assert nd.counters["duplicates_dropped"] == 0
        assert n2.operator.switches == n.operator.switches


def test_a_deferring_standby_skips_nearly_everything_yet_takes_over_exactly_with_a_switch_it_never_saw():
    """The default standby (standby_defer 1 s) lets inputs wait for Nd's acks: covered ones are never
    processed, the control tuple among them included, and the params that come with the checkpoints switch
    it at the same position as the primary."""
    total, new = 30_000, "price > 60 AND volume >= 1000"
    with InProcessTopology("memory", total=total, rate=10_000.0, bsize="10", operator_batch=500) as t:
        nu, n, n2, nd = (t.nodes[k] for k in ("nu", "n", "n2", "nd"))
        assert n2.cfg.standby_defer == 1.0
        assert t.wait(lambda: n.processed.input_pos > 5_000)
        nu.inject_control(control.encode(new))
        assert t.wait(lambda: n.operator.switches and n2.operator.switches, 10)
        assert t.wait(lambda: n.processed.input_pos > 20_000)
        assert n2.operator.switches == n.operator.switches
        got = n2.counters["backup_tuples"]
        assert n2.counters["skipped_tuples"] > 0.8 * got, n2.counters
        assert n2.counters["processed_tuples"] < 0.2 * got, n2.counters
        t.kill("n")
        exp = expected_outputs(["I1", "I2"], seed=7, total=total, predicate="price > 100",
                               switch=(n.operator.switches[0][0], new))
        assert t.wait(lambda: nd.inbound.delivered_through >= len(exp), 30)
        res = compare(exp, output(t))
        assert res.ok, res
        assert nd.counters["duplicates_dropped"] == 0


class Gathering(Selection):
    """An engine whose every call costs a fixed time (as a Spark micro-batch): it asks the node to gather
    at takeover, and records the node's role at each call."""

    takeover_gather = True

    def __init__(self, predicate):
        super().__init__(predicate)
        self.node = None
        self.calls: list[tuple[str, int, int]] = []  # (role of the node, first, end)

    def submit(self, batch):
        if self.node is not None:
            self.calls.append((str(self.node.state.role), batch.first, batch.end))
        return super().submit(batch)


def test_a_gathering_operator_gets_the_held_inputs_and_nus_resend_in_one_call_at_takeover():
    total = 30_000
    with InProcessTopology("memory", total=total, rate=10_000.0, bsize="10", operator=Gathering) as t:
        n2, nd = t.nodes["n2"], t.nodes["nd"]
        n2.operator.node = n2
        assert t.wait(lambda: nd.inbound.delivered_through > 4000)
        t.kill("n")
        exp = expected(total)
        assert t.wait(lambda: nd.inbound.delivered_through >= len(exp), 30)
        res = compare(exp, output(t))
        assert res.ok, res
        calls = n2.operator.calls
        assert not [c for c in calls if c[0] == "promoting"], "nothing is taken while the links are rebuilt"
        first = next(c for c in calls if c[0] == "primary")
        head = n2.takeover.recovery["head_at_takeover"]
        assert first[2] - 1 >= head, (first, n2.takeover.recovery)  # the held inputs and Nu's resend, one call
        assert n2.takeover.recovery["catch_up_ms"] < GATHER_WAIT_BOUND_MS
        assert not n2.takeover.gathering


GATHER_WAIT_BOUND_MS = 2_000  # generous: the wait ends on the resend's arrival, at most 250 ms after PRIMARY


def test_a_backup_run_that_fails_to_compress_is_cut_again_in_a_new_session_and_a_takeover_is_exact():
    """zstd (or memory) failing on one run: Nu counts it, resyncs the standby and goes on; nothing lost."""
    import zstandard as zstd

    total = 20_000
    with InProcessTopology("memory", total=total, rate=20_000.0, bsize="10") as t:
        nu, calls = t.nodes["nu"], [0]
        encode = nu.outbound.backup.run_encoder.encode

        def failing_once(run):
            calls[0] += 1
            if calls[0] == 3:
                raise zstd.ZstdError("zstd compression failed")
            return encode(run)

        nu.outbound.backup.run_encoder.encode = failing_once
        assert t.wait(lambda: nu.counters["backup_encode_errors"] == 1 and nu.counters["backup_tuples"] > 3000, 30)
        t.kill("n")
        exp = expected(total)
        assert t.wait(lambda: t.nodes["nd"].inbound.delivered_through >= len(exp), 30)
        assert compare(exp, output(t)).ok
        assert t.nodes["n2"].state.role == "primary" and t.nodes["nd"].counters["duplicates_dropped"] == 0
        assert nu.counters.get("loop_crashes", 0) == 0
