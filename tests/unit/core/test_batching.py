"""Algorithm 1: Bsize parsed once, full batches cut, trimmed positions skipped."""

import pytest

from lazystandby.core.batching import BackupBatcher, parse_bsize
from tests.unit.core.queued import filled


@pytest.mark.parametrize("text,value", [("1", 1), ("10", 10), ("inf", None), (None, None)])
def test_parse_bsize(text, value):
    assert parse_bsize(text) == value


def test_parse_bsize_refuses_zero():
    with pytest.raises(ValueError):
        parse_bsize("0")


@pytest.mark.parametrize("bsize,expected", [(1, 25), (10, 2), (None, 0)])
def test_algorithm_1_cuts_full_batches_only(bsize, expected):
    q = filled(25)
    b = BackupBatcher(bsize)
    batches = b.due(q, max_batches=1000)
    assert len(batches) == expected
    assert all(len(x) == bsize for x in batches)
    assert b.unbatched(q) == 25 - sum(map(len, batches))


def test_batcher_skips_what_level1_trimmed_and_rewinds_on_failure():
    q = filled(40)
    b = BackupBatcher(10)
    assert [x.first for x in b.due(q, 1)] == [1]
    b.confirm(10)
    q.trim(25)  # Nd holds the outputs of 1..25: no standby needs them
    assert [x.first for x in b.due(q, 10)] == [26]
    b.rewind()  # that batch was never acknowledged: cut again
    assert b.batched_through == 25
    assert [x.first for x in b.due(q, 10)] == [26]
