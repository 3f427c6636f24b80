"""Compiling zrun.c into _zrun.so (lazystandby.native). The standard library only: setup.py loads this file
by its path in pip's isolated build environment, where neither numpy nor zstandard is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "zrun.c"
LIBRARY = "_zrun.so"


def build(out_dir: Path = HERE, cc: str | None = None) -> Path | None:
    """Compile zrun.c into out_dir/_zrun.so; None (and a line on stdout) when no C compiler is found or it
    fails: the codec then uses python-zstandard."""
    cc = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        print("lazystandby.native: no C compiler; backup compression stays on python-zstandard")
        return None
    out = Path(out_dir) / LIBRARY
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    try:
        done = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(SOURCE)], capture_output=True,
                              text=True)
        error = done.stderr if done.returncode else ""
    except OSError as e:
        error = str(e)
    if error or not tmp.exists():
        print(f"lazystandby.native: {cc} failed, backup compression stays on python-zstandard:\n{error}")
        tmp.unlink(missing_ok=True)
        return None
    tmp.replace(out)  # atomic: a node importing meanwhile sees the old library or the new one
    return out


if __name__ == "__main__":
    build()
