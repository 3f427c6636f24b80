"""Build hook: generate the protocol's Python modules (services/lazystandby/v1) from proto/ with
grpcio-tools, so that `pip install .` from a fresh clone ships them, and compile the native backup
compressor (services/lazystandby/native/zrun.c) where a C compiler is found; where none is, a library
already built in the source tree (`make setup`) ships as package data, or the codec uses python-zstandard.
Everything else is in pyproject.toml."""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PROTO = ROOT / "proto" / "lazystandby" / "v1" / "lazystandby.proto"


class BuildWithProto(build_py):
    def run(self) -> None:
        from grpc_tools import protoc

        args = ["protoc", f"-I{ROOT / 'proto'}", f"--python_out={ROOT / 'services'}",
                f"--grpc_python_out={ROOT / 'services'}", str(PROTO)]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {PROTO}")
        super().run()
        sys.path.insert(0, str(ROOT / "services"))
        from lazystandby.native import build

        if not self.editable_mode:
            build(Path(self.build_lib) / "lazystandby" / "native")


setup(cmdclass={"build_py": BuildWithProto})
