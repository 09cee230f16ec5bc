"""The manual stays true to the code: its generated references are fresh, the README's test
command is the one CI runs, and the front door and the map stay short enough to read."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 200
ARCHITECTURE_MAX_LINES = 250


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


def _readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv")]
    test = [c for c in commands if "pytest" in c]
    assert len(test) == 1, f"expected one test command in README.md, found {test}"
    return test[0]


def test_ci_and_the_manual_run_the_readme_test_command_verbatim() -> None:
    command = _readme_test_command()
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in (ROOT / "docs" / "contributing.md").read_text().splitlines()
    # A broken link in the manual fails the command before the suite starts.
    assert "mkdocs build --strict" in command
    assert command.index("mkdocs build --strict") < command.index(".venv/bin/pytest")


@pytest.mark.parametrize(
    ("name", "most"), [("README.md", README_MAX_LINES), ("ARCHITECTURE.md", ARCHITECTURE_MAX_LINES)]
)
def test_the_front_door_and_the_map_stay_short(name: str, most: int) -> None:
    lines = len((ROOT / name).read_text().splitlines())
    assert lines <= most, f"{name} has {lines} lines (at most {most}): move detail into docs/"


def test_the_map_names_only_tests_that_exist() -> None:
    architecture = (ROOT / "ARCHITECTURE.md").read_text()
    modules = set(re.findall(r"tests/(test_\w+)\.py", architecture))
    assert modules, "ARCHITECTURE.md names the test that keeps each rule"
    missing = sorted(m for m in modules if not (ROOT / "tests" / f"{m}.py").exists())
    assert not missing, f"ARCHITECTURE.md names test modules that do not exist: {missing}"

    defined = {
        name
        for path in (ROOT / "tests").glob("test_*.py")
        for name in re.findall(r"^(?:async )?def (test_\w+)", path.read_text(), re.MULTILINE)
    }
    named = set(re.findall(r"`(?:tests/test_\w+\.py::)?(test_\w+)`", architecture)) - modules
    unknown = sorted(named - defined)
    assert not unknown, f"ARCHITECTURE.md names tests that do not exist: {unknown}"


@pytest.mark.parametrize("name", ["README.md", "ARCHITECTURE.md"])
def test_links_from_outside_the_manual_reach_its_pages(name: str) -> None:
    # mkdocs --strict checks the links inside docs/; these two files live beside it.
    text = (ROOT / name).read_text()
    targets = re.findall(r"\]\((?!https?://)([^)#\s]+)", text)
    missing = sorted({t for t in targets if not (ROOT / t).exists()})
    assert not missing, f"{name} links to files that do not exist: {missing}"


def _rooms() -> list[tuple[str, str]]:
    """The map's rooms table: each row's package and what it says lives there."""
    architecture = (ROOT / "ARCHITECTURE.md").read_text()
    table = architecture.split("## Rooms", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \| (.*) \|$", table, re.MULTILINE)


def _path_exists(name: str, package: str) -> bool:
    """`name` as the row of `package` writes it: from that package, a package above it (a row
    may name a sibling, `cli/setup_cmd.py` in `agentcomms/setup/`), or the repository's top."""
    here = ROOT / package
    folders = [here, *(p for p in here.parents if p == ROOT or ROOT in p.parents)]
    return any((folder / name).exists() for folder in folders)


def test_the_rooms_table_names_only_paths_that_exist() -> None:
    rows = _rooms()
    assert len(rows) > 10, "ARCHITECTURE.md has a rooms table, one row per package"
    missing = [f"row {package}" for package, _ in rows if not (ROOT / package).is_dir()]
    for package, cell in rows:
        for name in re.findall(r"`([\w./-]+(?:\.py|/))`", cell):
            if not _path_exists(name, package):
                missing.append(f"{name} (in the row of {package})")
    assert not missing, f"ARCHITECTURE.md's rooms table names what does not exist: {missing}"
