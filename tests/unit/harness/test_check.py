"""The truth-table check: loss, duplication and order reported."""

from lazystandby.harness.check import compare, expected_outputs


def test_truth_table_check_reports_loss_duplication_and_order():
    exp = expected_outputs(["I1", "I2"], seed=1, total=200, predicate="price > 100")
    good = [(i + 1, s, q) for i, (s, q) in enumerate(exp)]
    assert compare(exp, good).ok
    lost = compare(exp, good[:5] + good[6:])
    assert lost.lost == 1 and lost.oseq_gaps > 0 and lost.diff
    dup = compare(exp, good + [(len(good) + 1, *exp[3])])
    assert dup.duplicated == 1
    i1 = [i for i, (s, _) in enumerate(exp) if s == "I1"][:2]
    order = list(exp)
    order[i1[0]], order[i1[1]] = order[i1[1]], order[i1[0]]
    swapped = compare(exp, [(i + 1, s, q) for i, (s, q) in enumerate(order)])
    assert swapped.out_of_order >= 1 and swapped.lost == 0 and not swapped.ok
    k = next(i for i in range(len(exp) - 1) if exp[i][0] != exp[i + 1][0])  # two outputs of different streams
    across = compare(exp, [(i + 1, s, q) for i, (s, q) in enumerate(exp[:k] + exp[k:k + 2][::-1] + exp[k + 2:])])
    assert across.out_of_order == 0 and not across.same_order and not across.ok
    extra = compare(exp, good + [(len(good) + 1, "I1", 10**9)])
    assert extra.unexpected == 1 and extra.duplicated == 0 and not extra.ok
