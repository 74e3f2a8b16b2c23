"""Regenerate gavel_pb2.py from gavel.proto (needs grpcio-tools).

    python -m gavel_ng.protocol.protos.generate [--out DIR]

The stubs are committed so that a worker or job process needs only grpcio and protobuf
at run time; tests/worker/test_protocol.py checks that the committed file matches this
script's output. Only message code is generated: service stubs and handlers are built
from the file's descriptor (gavel_ng.protocol.rpc), which avoids the grpc version pin that
generated *_pb2_grpc.py files carry.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROTO = Path(__file__).with_name("gavel.proto")
ROOT = PROTO.parents[3]           # the directory holding the gavel_ng package
RELATIVE = PROTO.relative_to(ROOT)
HEADER = "# ruff: noqa\n"              # generated code: exempt from the linter


def generate(out: Path) -> Path:
    """Write gavel_ng/protocol/protos/gavel_pb2.py under `out`; return its path."""
    from grpc_tools import protoc

    out.mkdir(parents=True, exist_ok=True)
    code = protoc.main(["grpc_tools.protoc", f"-I{ROOT}", f"--python_out={out}", str(RELATIVE)])
    if code != 0:
        raise RuntimeError(f"protoc failed with status {code}")
    path = out / RELATIVE.with_name("gavel_pb2.py")
    path.write_text(HEADER + path.read_text())
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT, help="output root (default: in place)")
    args = parser.parse_args(argv)
    path = generate(args.out)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
