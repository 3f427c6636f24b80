"""The layering, checked on the source: the import graph of the runtime has no cycle (imports inside
functions count; those under `if TYPE_CHECKING:` name a type for annotations only and do not), core/ is
pure, node/ sees no wire format, nothing in the runtime imports the harness, no comment tells what
happened in a run, and no class in services/ is over 400 lines or function over 60.

Run it alone with `pytest tests/unit/test_architecture.py`; on failure it names the modules involved."""

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"lazystandby": ROOT / "services" / "lazystandby", "lazystandby_spark": ROOT / "spark" / "lazystandby_spark"}
RUNTIME = ("core", "node", "transport", "operators", "sources", "sinks", "formats", "config", "metrics", "stats")
CORE_ALLOWED = {"zstandard", "pyarrow", "numpy"}


def _module_name(path: Path) -> str:
    for top, base in PACKAGES.items():
        if path.is_relative_to(base):
            parts = [top, *path.relative_to(base).with_suffix("").parts]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(path)


def _modules() -> dict[str, Path]:
    out = {}
    for base in PACKAGES.values():
        for p in base.rglob("*.py"):
            if "v1" not in p.relative_to(base).parts:  # generated code
                out[_module_name(p)] = p
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module `name` imports, anywhere in the file, resolved to absolute names."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _is_type_checking(block.test)
                   for stmt in block.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.add(sub if sub in known or sub.startswith("lazystandby.v1") else base)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {n: _imports(n, p, known) for n, p in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    out, state, stack = [], {}, []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if d not in graph:
                continue
            if state.get(d) == 1:
                out.append([*stack[stack.index(d):], d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    return out


def _in(name: str, folder: str) -> bool:
    return name == f"lazystandby.{folder}" or name.startswith(f"lazystandby.{folder}.")


def test_the_import_graph_has_no_cycle():
    assert _cycles(_graph()) == []


def test_core_imports_only_the_standard_library_and_data_libraries():
    bad = {n: sorted(d for d in deps if not _in(d, "core") and d.split(".")[0] not in sys.stdlib_module_names
                     and d.split(".")[0] not in CORE_ALLOWED and d != "__future__")
           for n, deps in _graph().items() if _in(n, "core")}
    assert {n: d for n, d in bad.items() if d} == {}


# The operator node's sides over their shared base: one runtime in several modules.
OPERATOR_SIDES = {f"lazystandby.node.{m}" for m in ("operator_base", "primary", "standby", "passive", "takeover",
                                                     "quarantine", "operator_probe", "forecast", "covering",
                                                     "connection_watch", "operator_calls", "operator_status", "inbound",
                                                     "runs", "deliver_link")}
# The outbound link and its parts: a sender any runtime may compose (Nu's is its source's).
LINK_PARTS = {"lazystandby.node.outbound", "lazystandby.node.bsize_tuning", "lazystandby.node.backup_link",
              "lazystandby.node.push_link"}
# The parts only Nu is composed of.
UPSTREAM_PARTS = {"lazystandby.node.intake"}
# The parts only Nd is composed of.
DOWNSTREAM_PARTS = {"lazystandby.node.delivery_inbound"}


def test_node_runtimes_see_no_wire_format_and_no_sibling_runtime():
    def allowed(n: str) -> set[str]:
        shared = {"lazystandby.node", "lazystandby.node.common"} | LINK_PARTS
        if n in OPERATOR_SIDES | {"lazystandby.node.operator_node"}:
            return shared | OPERATOR_SIDES
        if n in DOWNSTREAM_PARTS | {"lazystandby.node.downstream"}:
            return shared | DOWNSTREAM_PARTS
        return shared | UPSTREAM_PARTS if n in UPSTREAM_PARTS | {"lazystandby.node.upstream"} else shared

    bad = {n: sorted(d for d in deps if d.startswith("lazystandby.v1") or "_pb2" in d
                     or (_in(d, "node") and d not in allowed(n)))
           for n, deps in _graph().items() if _in(n, "node")}
    assert {n: d for n, d in bad.items() if d} == {}


def test_the_runtime_imports_nothing_of_the_harness():
    bad = {n: sorted(d for d in deps if _in(d, "harness"))
           for n, deps in _graph().items() if any(_in(n, f) for f in RUNTIME) or n.startswith("lazystandby_spark")}
    assert {n: d for n, d in bad.items() if d} == {}


def test_the_checks_would_see_a_violation():
    """The checker itself: a cycle and a forbidden import, made up, are found."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    src = ROOT / "services" / "lazystandby" / "node" / "outbound.py"
    deps = _imports("lazystandby.node.outbound", src, set(_modules()))
    assert "lazystandby.core.recovery" in deps and "lazystandby.transport.peer" in deps
    # A type named for annotations only is no dependency at run time; the imports beside it are.
    part = ROOT / "services" / "lazystandby" / "node" / "primary.py"
    deps = _imports("lazystandby.node.primary", part, set(_modules()))
    assert "lazystandby.node.operator_base" not in deps and "lazystandby.node.common" in deps


HISTORY = re.compile(r"once (read|took|came)|in one run|in [0-9]+ runs", re.I)


def test_no_comment_tells_what_happened_in_a_run():
    """Comments say why, in the present tense; a measured figure lives in a bench result and docs/."""
    found = [f"{p.relative_to(ROOT)}:{n}" for base in ("services", "spark") for p in (ROOT / base).rglob("*.py")
             for n, line in enumerate(p.read_text().splitlines(), 1) if HISTORY.search(line)]
    assert found == []
    assert HISTORY.search("# which once read as 150 MB/s") and HISTORY.search("# in 3 runs")


CLASS_MAX, FUNCTION_MAX = 400, 60


def _too_long(tree: ast.AST, where: str) -> list[str]:
    out = []
    for n in ast.walk(tree):
        limit = CLASS_MAX if isinstance(n, ast.ClassDef) else \
            FUNCTION_MAX if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) else None
        if limit is not None and n.end_lineno - n.lineno + 1 > limit:
            out.append(f"{where}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines, at most {limit})")
    return out


def test_no_class_over_400_lines_and_no_function_over_60_in_services():
    """A newcomer reads a class in one sitting and a function on one screen: a longer one is split into
    parts that hold their own state (node/: inbound, operator_calls, forecast, ...)."""
    found = [line for p in (ROOT / "services").rglob("*.py") if "v1" not in p.parts
             for line in _too_long(ast.parse(p.read_text()), str(p.relative_to(ROOT)))]
    assert found == []
    made_up = "class A:\n" + "    x = 1\n" * CLASS_MAX + "def f():\n" + "    y = 1\n" * FUNCTION_MAX
    assert [s.split()[1] for s in _too_long(ast.parse(made_up), "m")] == ["A", "f"]


# Private names that libraries declare as their API: a named tuple's `_replace`, librdkafka's error codes,
# and the JVM handles PySpark gives no public name for.
FOREIGN_PRIVATE = {"_replace", "_AUTO_OFFSET_RESET", "_jvm", "_jsparkSession", "_get_j_spark_session_class"}


def _private_calls(tree: ast.AST, where: str) -> list[str]:
    """`x._name` where x is not `self` or `cls`, nor a class of the same module: an object reaching into
    another's private state instead of calling what that one declares."""
    own = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__") \
                and n.attr not in FOREIGN_PRIVATE \
                and not (isinstance(n.value, ast.Name) and (n.value.id in ("self", "cls") or n.value.id in own)):
            out.append(f"{where}:{n.lineno} {ast.unparse(n)}")
    return out


def test_no_object_reaches_into_another_objects_private_members():
    """A part calls the node, and the node its parts, only through what each declares (its public
    methods and attributes), so that a call can be followed from the file it is in."""
    found = [line for base in PACKAGES.values() for p in base.rglob("*.py") if "v1" not in p.relative_to(base).parts
             for line in _private_calls(ast.parse(p.read_text()), str(p.relative_to(ROOT)))]
    assert found == []
    made_up = "class A:\n    def f(self, n):\n        return self._x + A._y + n._z\n"
    assert [s.split()[1] for s in _private_calls(ast.parse(made_up), "m")] == ["n._z"]
