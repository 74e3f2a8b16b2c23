"""`gavel-ng scheduler`: a bad --metrics-port is one line naming it (exit 2), and the runtime's
event lines show at the default level while the rest of gavel_ng stays at WARNING."""

from __future__ import annotations

import json
import logging
import socket

import pytest

from gavel_ng.cli import main
from gavel_ng.cli.scheduler_cmd import show_events


def _args(tmp_path, *extra: str) -> list[str]:
    config = tmp_path / "cluster.json"
    config.write_text(json.dumps({"worker_types": ["v100"]}))
    return ["scheduler", "--cluster-config", str(config), "--state", str(tmp_path / "state"), "--port", "0",
            "--bind", "127.0.0.1", *extra]


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_metrics_port_out_of_range_is_one_line(tmp_path, capsys, port):
    assert main(_args(tmp_path, "--metrics-port", port)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--metrics-port={port}:" in err, err


def test_a_metrics_port_in_use_is_one_line(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(_args(tmp_path, "--metrics-port", str(port))) == 2
    err = capsys.readouterr().err
    assert "--metrics-port" in err and "cannot listen on 127.0.0.1:" in err and err.count("\n") == 1, err


def test_runtime_events_show_by_default_and_planner_chatter_does_not():
    runtime = logging.getLogger("gavel_ng.runtime")
    saved, root = runtime.level, logging.getLogger().level
    logging.getLogger().setLevel(logging.WARNING)           # what `gavel-ng` sets without -v
    try:
        runtime.setLevel(logging.NOTSET)
        assert not logging.getLogger("gavel_ng.runtime.jobs").isEnabledFor(logging.INFO)
        show_events()
        assert logging.getLogger("gavel_ng.runtime.jobs").isEnabledFor(logging.INFO)
        assert not logging.getLogger("gavel_ng.mechanism").isEnabledFor(logging.INFO)
        assert not logging.getLogger("gavel_ng.policies").isEnabledFor(logging.INFO)
    finally:
        runtime.setLevel(saved)
        logging.getLogger().setLevel(root)
