"""A window's top groups (QUALIFY's `rank()` or `dense_rank() OVER (PARTITION BY window ... ORDER BY ...)
<= n`, formats/sql.TopN) over the rows of final windows, in Arrow.

By hand because no columnar library here ranks within groups: pyarrow's `rank` ranks a whole array,
and DuckDB or DataFusion would copy every closing window's rows into a query engine and back. The rows
are sorted once by partition and order terms; a rank is where its run of equal terms starts, counted
from where its partition starts.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..formats.sql import TopN
from .arrow_eval import evaluate


def top_mask(top: TopN, cols: dict[str, pa.Array], partition: list[pa.Array], n: int) -> pa.Array:
    """Which of `n` rows the ranking keeps. `cols`: the window's names (window_start, keys, `_agg<i>`),
    which the order terms are evaluated over; `partition`: the columns that tell partitions apart (the
    window's start, then `top.partition`'s keys). Spark's rule for NULLs among the order values unless
    the term says otherwise: first ascending, last descending; NULLs tie with each other."""
    if not n:
        return pa.array([], pa.bool_())
    table, sort_keys = {}, []
    for i, p in enumerate(partition):
        table[f"p{i}"] = p
        sort_keys.append((f"p{i}", "ascending"))
    for j, term in enumerate(top.order):
        v = evaluate(term.expr, cols, n)
        table[f"n{j}"] = pc.is_null(v)
        table[f"o{j}"] = v
        sort_keys += [(f"n{j}", "descending" if term.nulls_first else "ascending"),
                      (f"o{j}", "descending" if term.desc else "ascending")]
    t = pa.table(table)
    idx = pc.sort_indices(t, sort_keys=sort_keys)
    t = t.take(idx)
    new_part = _starts(t, [f"p{i}" for i in range(len(partition))], n)
    new_tie = new_part | _starts(t, [f"o{j}" for j in range(len(top.order))], n)
    pos = np.arange(n)
    part_at = np.maximum.accumulate(np.where(new_part, pos, 0))
    if top.fn == "rank":
        rank = np.maximum.accumulate(np.where(new_tie, pos, 0)) - part_at + 1
    else:
        ties = np.cumsum(new_tie)
        rank = ties - ties[part_at] + 1
    keep = np.zeros(n, bool)
    keep[idx.to_numpy()] = rank <= top.limit
    return pa.array(keep)


def _starts(t: pa.Table, names: list[str], n: int) -> np.ndarray:
    """Per sorted row, whether any of the columns `names` differs from the row before (the first row
    always starts a run); NULL equals NULL."""
    out = np.zeros(n, bool)
    out[0] = True
    for name in names:
        c = t[name].combine_chunks()
        a, b = c.slice(1), c.slice(0, n - 1)
        differs = pc.fill_null(pc.not_equal(a, b), False)
        differs = pc.or_(differs, pc.xor(pc.is_null(a), pc.is_null(b)))
        out[1:] |= differs.to_numpy(zero_copy_only=False)
    return out
