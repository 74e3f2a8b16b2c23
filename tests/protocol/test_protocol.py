"""The committed message stubs are what the generator makes from gavel.proto."""

from __future__ import annotations

import pytest

from gavel_ng.protocol.protos import generate


def test_committed_stubs_match_the_proto(tmp_path):
    pytest.importorskip("grpc_tools")
    fresh = generate.generate(tmp_path)
    committed = generate.PROTO.with_name("gavel_pb2.py")
    assert fresh.read_text() == committed.read_text(), \
        "gavel_pb2.py is stale: run `python -m gavel_ng.protocol.protos.generate`"
