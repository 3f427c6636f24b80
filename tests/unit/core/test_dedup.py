"""Nd's precise delivery: repeats skipped, gaps refused."""

import pytest

from lazystandby.core.dedup import DeliveryDedup
from lazystandby.core.errors import (
    SequenceGap,
)


def test_dedup_skips_repeats_and_refuses_gaps():
    d = DeliveryDedup("Nd", 10)
    a = d.admit(8, 5)
    assert (a.skip, a.take) == (3, 2)
    assert d.admit(1, 5).take == 0
    with pytest.raises(SequenceGap, match="expected 11"):
        d.admit(12, 1)
