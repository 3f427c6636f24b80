"""Build hook: generate the protocol's Python modules (services/lazystandby/v1) from proto/ with
grpcio-tools, so that `pip install .` from a fresh clone ships them, and compile the native backup
compressor (services/lazystandby/native/zrun.c) where a C compiler is found; where none is, a library
already built in the source tree (`make setup`) ships as package data, or the codec uses python-zstandard.
deploy/tls/make-certs.sh ships in the package too (launch makes a CA per run). Everything else is in
pyproject.toml."""

import importlib.util
import shutil
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
            # The development CA's script, for launch and the bench's throwaway CA (harness.launcher.make_certs)
            # in an installed package; deploy/tls/ stays its one source.
            certs = ROOT / "deploy" / "tls" / "make-certs.sh"
            if not certs.exists():
                raise RuntimeError(f"{certs} is missing: the package ships it (a source tree without deploy/tls?)")
            shutil.copy2(certs, Path(self.build_lib) / "lazystandby" / "harness" / "make-certs.sh")


setup(cmdclass={"build_py": BuildWithProto})
