"""Build hook: generate the protocol's Python modules (services/lazystandby/v1) from proto/ with
grpcio-tools, so that `pip install .` from a fresh clone ships them. Everything else is in pyproject.toml."""

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


setup(cmdclass={"build_py": BuildWithProto})
