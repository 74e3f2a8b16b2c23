"""Every flag of every subcommand says what it is for, -v counts wherever it is given, and a
config value is blamed on the config key, not on a flag the user never passed."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from gavel_ng.cli import build_parser, main, verbosity


def _walk(parser: argparse.ArgumentParser, path: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, f"{path} {name}")
        else:
            yield path, action


def test_every_argument_of_every_subcommand_has_help():
    seen = list(_walk(build_parser(), "gavel-ng"))
    assert {p for p, _ in seen} >= {"gavel-ng worker", "gavel-ng scheduler", "gavel-ng profiles list"}
    missing = [f"{p} {'/'.join(a.option_strings) or a.dest}" for p, a in seen
               if not a.help or a.help == argparse.SUPPRESS]
    assert missing == []


@pytest.mark.parametrize("argv, count", [
    (["status", "-v"], 1),
    (["-v", "status", "-vv"], 3),
    (["profiles", "-v", "list", "-v"], 2),
    (["worker", "--scheduler", "h:1", "-v", "--gpus", "2"], 1),
    (["status"], 0),
])
def test_verbose_counts_before_and_after_the_command(argv, count):
    assert verbosity(build_parser().parse_args(argv)) == count


def test_verbose_after_the_command_is_accepted_by_a_real_process(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-m", "gavel_ng", "worker", "--scheduler", "127.0.0.1:1", "--gpu-type",
                           "v100", "--gpus", "0", "-v"], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "gavel-ng worker: error: --gpus='0': must be an integer >= 1, or auto\n"


@pytest.mark.parametrize("flag, field", [([], "cluster-config.policy"), (["--policy", "nope"], "--policy")])
def test_a_bad_policy_is_blamed_on_where_it_came_from(tmp_path, capsys, flag, field):
    config = tmp_path / "cluster.json"
    config.write_text(json.dumps({"worker_types": ["v100"], "policy": "nope"}))
    rc = main(["scheduler", "--cluster-config", str(config), "--state", str(tmp_path / "state"), *flag])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gavel-ng scheduler: error: {field}='nope': unknown policy; known: "), err
    assert err.count("\n") == 1
