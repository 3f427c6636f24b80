"""Stream ids and per-stream sequence numbers."""

import pytest

from lazystandby.core.errors import (
    DuplicateSequence,
    NonMonotonicSequence,
    UnknownStream,
)
from lazystandby.core.seq import PerStreamSequence, StreamRegistry


def test_per_stream_sequence_refuses_repeats_and_regressions_without_changing_state():
    p = PerStreamSequence("Nu")
    p.commit(p.check([1, 2, 1], [1, 1, 3]))
    with pytest.raises(DuplicateSequence):
        p.check([1], [3])
    with pytest.raises(NonMonotonicSequence):
        p.check([2, 2], [5, 4])
    assert p.last == {1: 3, 2: 1}
    assert p.check([1], [10]) == {1: 10}  # gaps in a stream are allowed (Kafka offsets)


def test_registry_names_unknown_streams():
    r = StreamRegistry(["I1", "I2"])
    assert r.id_of("I2") == 2 and r.name_of(0) == "_control"
    with pytest.raises(UnknownStream, match="'I9'"):
        r.id_of("I9", node="Nu")
    with pytest.raises(UnknownStream, match="id 7 at seq 3"):
        r.check_ids([1, 7], [1, 3], node="N")
