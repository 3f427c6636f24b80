"""The columnar batch: its wire encoding, slicing and joining, and the checks of declared sizes."""

import pytest

from lazystandby.core import tuples
from lazystandby.core.errors import CorruptBatch
from lazystandby.core.tuples import TupleBatch
from tests.unit.core.batches import sample


def test_encoding_round_trips_inputs_and_outputs():
    b = sample(100)
    assert tuples.decode(tuples.encode(b)) == b
    out = b.select([0, 3, 7], first=5)
    back = tuples.decode(tuples.encode(out))
    assert back == out and back.sources.tolist() == [100, 103, 107] and back.first == 5


@pytest.mark.parametrize("mangle", [
    lambda d: d[:10],
    lambda d: b"XXXX" + d[4:],
    lambda d: d[:-1],
    lambda d: d + b"x",
])
def test_decode_refuses_damaged_bytes(mangle):
    with pytest.raises(CorruptBatch):
        tuples.decode(mangle(tuples.encode(sample())))


def test_slice_and_concat():
    b = sample(10, 20)
    parts = [b.slice(10, 15), b.slice(15, 22), b.slice(22, 30)]
    assert [len(p) for p in parts] == [5, 7, 8]
    assert TupleBatch.concat(parts) == b
    with pytest.raises(ValueError):
        TupleBatch.concat([parts[0], parts[2]])


def test_a_batch_declaring_fewer_raw_bytes_than_its_tuples_encoding_takes_is_found():
    raws = tuples.encode_runs(sample(n=20), 10)
    sizes = [len(r) for r in raws]
    assert min(sizes) >= tuples.run_head_bytes(10) and tuples.run_head_bytes(10) == 17 + 14 * 10
    assert tuples.short_batches([10, 10], sizes) is None
    assert tuples.short_batches([10, 10], [sizes[0], 156]) == 1  # one byte short of ten empty payloads
    assert tuples.short_batches([10, 10], [157, 157]) is None
    assert tuples.short_batches([3, 10], [59, 156]) == 1  # uneven counts: each against its own
    assert tuples.short_batches([3, 10], [58, 157]) == 0
    assert tuples.short_batches([], []) is None
    seven = sample(n=7)
    (raw,) = tuples.encode_runs(seven, 7)  # the header as encode_runs writes it
    assert tuples.run_head_bytes(7) == len(raw) - sum(len(p) for p in seven.payloads.to_pylist())
    assert tuples.short_batches([2**32 - 1], [10**6]) == 0  # a forged count: refused, not a numpy error
    assert tuples.short_batches([2**32 - 1, 1], [10**6, 31]) == 0
    with pytest.raises(CorruptBatch, match="do not fit their declared sizes"):
        tuples.decode_runs(raw, 1, 2**32 - 1, [len(raw)])  # an eager decode refuses the same count


def test_a_common_count_is_the_count_every_batch_holds():
    assert tuples.common_count([10, 10, 10]) == 10 and tuples.common_count([0, 0]) == 0
    assert tuples.common_count([10, 3]) is None and tuples.common_count([]) is None
