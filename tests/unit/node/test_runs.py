"""The operator loop's runs: consecutive frames taken as one run, joined only where sliced."""

from lazystandby.core.acks import Checkpoint
from lazystandby.core.tuples import TupleBatch


def test_the_operator_gets_consecutive_frames_as_one_run_and_jumps_in_place():
    from lazystandby.node.operator_node import Jump, Run, _join_runs

    def b(first, n):
        return TupleBatch(first=first, streams=[1] * n, seqs=list(range(first, first + n)), payloads=[b"x"] * n)

    jump = Jump(Checkpoint(20, 3))
    out = _join_runs([b(1, 4), b(5, 3), jump, b(21, 2), b(23, 2), b(40, 1)])
    assert [(x.first, len(x)) if isinstance(x, Run) else "jump" for x in out] == [
        (1, 7), "jump", (21, 4), (40, 1)]
    assert out[0].slice(1, 8).seqs.tolist() == list(range(1, 8))
    assert _join_runs([]) == []


def test_a_run_joins_only_the_stretch_it_is_sliced_at():
    from lazystandby.node.operator_node import Run

    def b(first, n):
        return TupleBatch(first=first, streams=[1] * n, seqs=list(range(first, first + n)), payloads=[b"x"] * n)

    parts = [b(1, 4), b(5, 3), b(8, 5)]
    run = Run(parts)
    assert (run.first, run.end, len(run)) == (1, 13, 12)
    assert run.slice(1, 13) == TupleBatch.concat(parts)
    assert run.slice(3, 10) == TupleBatch.concat(parts).slice(3, 10)
    one = run.slice(5, 8)
    assert one.first == 5 and one.seqs.tolist() == [5, 6, 7]
    assert run.slice(0, 100) == TupleBatch.concat(parts)  # clamped to the run
    empty = run.slice(20, 30)
    assert len(empty) == 0 and empty.first == 20
