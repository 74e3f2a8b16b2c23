"""docs/layout.md names every module of the package (its "Every module" table), so that the layout a reader
is shown is the layout there is."""

from __future__ import annotations

from test_imports import PACKAGE, ROOT


def test_every_module_is_named_in_the_layout_doc():
    text = (ROOT / "docs" / "layout.md").read_text()
    package = ROOT / PACKAGE
    modules = sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    missing = [m for m in modules if f"`{m}`" not in text]
    assert len(modules) > 150 and not missing, f"modules without a row in docs/layout.md: {missing}"
    named = {line.split("`")[1] for line in text.splitlines() if line.startswith("| `") and line.count("`") >= 2}
    gone = sorted(m for m in named if m.endswith(".py") and not (package / m).exists())
    assert not gone, f"docs/layout.md names modules that no longer exist: {gone}"
