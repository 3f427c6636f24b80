"""The fixtures of the node tests (tests/unit/node/support.py)."""

from tests.unit.node.support import nd, net, primary, standby  # noqa: F401
