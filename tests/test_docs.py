"""The manual stays true to the code: its generated references are fresh, the README's test
command is the one CI runs, and the front door and the map stay short enough to read."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    # docs/gen.py is a script beside the pages it writes, not a package module.
    spec = importlib.util.spec_from_file_location("docs_gen", ROOT / "docs" / "gen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_references_are_fresh() -> None:
    gen = _generator()
    stale = gen.stale_pages()
    assert not stale, (
        f"{', '.join(stale)} no longer match the code: regenerate with `{gen.REGENERATE}`"
    )


def test_a_stale_page_is_named_with_the_command_that_regenerates_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gen = _generator()
    monkeypatch.setattr(gen, "DOCS", tmp_path)
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0

    page = tmp_path / "reference" / "cli.md"
    page.write_text(page.read_text().replace("agentcomms send", "agentcomms post"))
    capsys.readouterr()
    assert gen.main(["--check"]) == 1
    assert capsys.readouterr().err == (
        "docs/reference/cli.md is stale: regenerate it with `.venv/bin/python docs/gen.py`\n"
    )


def test_the_generator_refuses_an_unknown_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert _generator().main(["--chek"]) == 2
    assert "usage: .venv/bin/python docs/gen.py [--check]" in capsys.readouterr().err
