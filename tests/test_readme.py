"""The README's promises: its two policies are the example files and the allocation one solves, the
demo prints what the README shows, every built-in policy is documented, every link leads somewhere."""

import re
from pathlib import Path

import numpy as np
import pytest

import gavel_ng as g
from gavel_ng.cli import main
from gavel_ng.policies import get_policy, list_policies

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
POLICIES_DOC = (ROOT / "docs" / "policies.md").read_text()
ALLOCATION_EXAMPLE = ROOT / "examples" / "allocation_policy.py"
ROUND_EXAMPLE = ROOT / "examples" / "round_policy.py"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def block_with(text: str, marker: str) -> str:
    return next(b for b in python_blocks(text) if marker in b)


def test_readme_has_150_to_200_lines():
    assert 150 <= len(README.splitlines()) <= 200


@pytest.mark.parametrize("marker, example", [("@g.policy(", ALLOCATION_EXAMPLE),
                                             ("@g.round_policy(", ROUND_EXAMPLE)])
def test_readme_policy_blocks_are_the_example_files(marker, example):
    assert block_with(README, marker) == example.read_text()
    assert block_with(POLICIES_DOC, marker) == example.read_text()


def test_allocation_example_solves(capsys):
    assert main(["solve", "--plugin", str(ALLOCATION_EXAMPLE), "--policy", "proportional_fairness",
                 "--example", "paper_example", "--json"]) == 0
    capsys.readouterr()
    inp = g.SchedulingProblem.build(["j0", "j1", "j2"], ["v100", "k80"], [1, 1], [[40, 10], [12, 4], [100, 50]])
    sol = g.solve(inp, "proportional_fairness")
    sol.allocation.check()
    assert sol.ok and sol.solver == "clarabel"
    # proportional fairness: its log-sum is at least LAS's
    p = g.Problem(inp)
    logsum = lambda x: np.log(p.normalized_thr.value(x)).sum()  # noqa: E731
    assert logsum(sol.x) >= logsum(g.solve(inp, "las").x) - 1e-6
    assert g.solve(inp, "proportional_fairness_agnostic").allocation.check()


def test_every_builtin_policy_is_in_the_policies_table():
    for name in list_policies():
        spec = get_policy(name)
        builtin = getattr(spec.fn, "__module__", "").startswith("gavel_ng.")
        if builtin and spec.base is None:   # made twins (NAME_agnostic) are documented with NAME
            assert f"| `{name}` |" in POLICIES_DOC, name


@pytest.mark.parametrize("cmd", ["make demo", "make test", "make test-fast"])
def test_readme_names_the_commands(cmd):
    assert cmd in README


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("doc", ["README.md"] + [f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md"))])
def test_relative_links_lead_somewhere(doc):
    path = ROOT / doc
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if "://" in target:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        assert dest.exists(), f"{doc}: {target}"
        if anchor and dest.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", dest.read_text(), re.M)
            assert anchor in {slug(h) for h in headings}, f"{doc}: {target}"


def test_readme_links_every_doc():
    for p in (ROOT / "docs").glob("*.md"):
        assert f"(docs/{p.name})" in README, p.name


def test_demo_prints_the_readme_comparison(capsys):
    assert main(["simulate", "--policy", "las,las_agnostic", "--cluster", "v100=8,a100=8,h100=8",
                 "--jobs-per-hour", "2", "--window", "0:200", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("las (heterogeneity-aware) vs las_agnostic:"))
    assert line in README
    shown = README.split("(here, the `las` run):")[1].split("```")[1]   # the README's las summary
    for row in ("average JCT", "makespan", "utilization", "cost"):
        want = next(x for x in shown.splitlines() if x.startswith(row))
        assert want in out, (want, out)
