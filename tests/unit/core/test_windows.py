"""Window assignment, the ledger of what each window's results depend on, and the trim rule for outputs
that depend on more than the input that made them."""

import numpy as np
import pytest

from lazystandby.core.windows import WindowLedger, WindowSpec, trimmable_through


def test_a_tick_lies_in_size_over_slide_windows_aligned_on_the_epoch():
    tumbling, sliding = WindowSpec(1000, 1000), WindowSpec(1000, 250)
    ts = np.array([0, 999, 1000, 1_764_000_000_123, -1])
    assert tumbling.starts(ts)[:, 0].tolist() == [0, 0, 1000, 1_764_000_000_000, -1000]
    assert sliding.starts(ts[3:4]).tolist() == [[1_764_000_000_000, 1_763_999_999_750, 1_763_999_999_500,
                                                 1_763_999_999_250]]
    for start, t in zip(sliding.starts(ts).ravel().tolist(), np.repeat(ts, 4).tolist(), strict=True):
        assert start <= t < start + 1000 and start % 250 == 0
    with pytest.raises(ValueError, match="the slide must divide the size"):
        WindowSpec(1000, 300)


def test_lateness_keeps_a_window_open_past_its_end():
    spec = WindowSpec(1000, 1000, lateness_ms=200)
    assert spec.final_at(0) == 1200
    assert spec.late(np.array([500, 1500]), watermark=1200).tolist() == [True, False]
    assert spec.late(np.array([500]), watermark=1199).tolist() == [False]


def test_the_ledger_closes_windows_at_the_watermark_and_knows_the_first_input_each_needs():
    led = WindowLedger(WindowSpec(1000, 1000))
    led.add(np.array([1, 2, 3]), np.array([100, 1100, 200]))  # windows 0 (inputs 1, 3) and 1000 (input 2)
    led.add(np.array([4, 5]), np.array([2100, 1900]))  # windows 2000 (4) and 1000 (5)
    assert len(led) == 3 and led.needed_from(covered=0) == 1
    assert led.close(position=6, watermark=1000) == [0]  # window 0 is final: its results at position 6
    # Nd does not hold position 6 yet: inputs 1 and 3 are still needed (a replay must rebuild window 0).
    assert led.needed_from(covered=5) == 1
    assert led.needed_from(covered=6) == 2  # delivered: the first input of the open windows is next
    assert led.close(position=9, watermark=3000) == [1000, 2000]
    assert led.needed_from(covered=8) == 2 and led.needed_from(covered=9) is None
    with pytest.raises(ValueError, match="behind"):
        led.close(position=10, watermark=2999)


def test_the_same_link_order_gives_the_same_ledger_however_it_is_cut():
    rng = np.random.default_rng(5)
    ts = np.sort(rng.integers(0, 20_000, 3000)) + rng.integers(-300, 300, 3000)
    positions = np.arange(1, 3001)
    marks = {p: int(ts[:p].max()) - 500 for p in range(250, 3001, 250)}  # watermarks in the link order

    def run(cuts):
        """Batches cut at `cuts`; within a batch, one `add` per run of inputs between watermarks."""
        led, closes, start = WindowLedger(WindowSpec(2000, 500, lateness_ms=100)), [], 0
        for end in [*cuts, 3000]:
            lo = start
            for mark in [m for m in sorted(marks) if start < m <= end]:
                led.add(positions[lo:mark - 1], ts[lo:mark - 1])  # inputs lo+1 .. mark-1
                closes.append((mark, led.close(mark, marks[mark])))
                lo = mark - 1
            led.add(positions[lo:end], ts[lo:end])
            start = end
        return closes, [led.needed_from(c) for c in (0, 1000, 2999)]

    assert run([]) == run([1, 17, 999, 1000, 2500]) == run(list(range(7, 3000, 7)))


@pytest.mark.parametrize("covered, needed, applied, through", [
    (100, None, None, 100),  # a selection: Nd's output alone decides (seed 000's rule)
    (100, 40, None, 39),  # an undelivered window result needs input 40 on
    (100, None, 70, 70),  # the standby has not applied past 70
    (100, 40, 20, 20),
    (100, 1, None, 0),
])
def test_an_input_is_trimmed_only_when_nd_holds_what_depends_on_it_and_the_standby_applied_it(
        covered, needed, applied, through):
    assert trimmable_through(covered, needed, applied) == through
