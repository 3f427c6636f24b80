"""Reading other processes from /proc in tests."""

from pathlib import Path


def cmdline(pid: int) -> str:
    """A process's command line, "" once it has exited (a descendant listed a moment ago may be gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:
        return ""
