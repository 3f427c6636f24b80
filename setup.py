"""Build hook: generate the protocol's Python modules (services/lazystandby/v1) from proto/ with
grpcio-tools, so that `pip install .` from a fresh clone ships them, and compile the native backup
compressor (services/lazystandby/native/zrun.c) where a C compiler is found; where none is, a library
already built in the source tree (`make setup`) ships as package data, or the codec uses python-zstandard.
Everything else is in pyproject.toml."""

import importlib.util
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
        if not self.editable_mode:
            # By its path: importing the package would need numpy, which pip's build environment lacks.
            spec = importlib.util.spec_from_file_location("native_build", ROOT / "services" / "lazystandby" /
                                                          "native" / "build.py")
            native_build = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(native_build)
            native_build.build(Path(self.build_lib) / "lazystandby" / "native")


setup(cmdclass={"build_py": BuildWithProto})
