"""`gavel-ng policies`: both kinds of policy from the one registry."""


import pytest

from gavel_ng.cli import main
from gavel_ng.policies import plugins


def test_lists_allocation_and_round_policies(capsys):
    assert main(["policies"]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert lines["las"][1:4] == ["allocation", "-", "-"]
    assert lines["tiresias"][1:5] == ["round", "run", "fixed", "60"]
    assert lines["goodput"][1:4] == ["round", "adapt", "60"]
    assert lines["pollux"][1] == "round" and "(all must)" in " ".join(lines["pollux"])


def test_lists_a_plugins_round_policy(tmp_path, capsys, clean_registry):
    plugin = tmp_path / "mine.py"
    plugin.write_text("import gavel_ng\n\n\n@gavel_ng.round_policy(\"my_rounds\", \"speedup sum\", jobs=\"fixed\", "
                      "round_seconds=120)\ndef my_rounds(ctx):\n    return ctx.assign(ctx.speedups)\n")
    assert main(["policies", "--plugin", str(plugin)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("my_rounds "))
    assert row.split()[1:5] == ["round", "run", "fixed", "120"] and row.endswith("speedup sum")


def test_a_plugin_without_policies_names_both_decorators(tmp_path, clean_registry):
    plugin = tmp_path / "empty.py"
    plugin.write_text("X = 1\n")
    with pytest.raises(Exception, match=r"@gavel_ng\.policy.*@gavel_ng\.round_policy"):
        plugins.load(str(plugin))
