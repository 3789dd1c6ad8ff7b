"""The docs tell the truth: every pass's page equals what its docstring renders to, and every
command and Python example of the README runs as written."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from graphtools.pass_infra import available_passes
from graphtools.pass_infra.describe import describe_pass, pass_markdown

README = REPO / "README.md"
PASS_DOCS = REPO / "docs" / "passes"


def _blocks(language: str, page: Path = README) -> list[str]:
    """The code blocks of ``page`` (the README) in ``language`` fenced at the margin (an
    excerpt indented in a list is not a whole example)."""
    return re.findall(rf"^```{language}\n(.*?)^```", page.read_text(), re.S | re.M)


def _commands() -> list[str]:
    found = []
    for block in _blocks("sh"):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("graphtools "):
                found.append(line)
    return found


def _builtin() -> dict[str, type]:
    return {
        name: cls
        for name, cls in available_passes().items()
        if cls.__module__.startswith("graphtools.passes.")
    }


@pytest.mark.parametrize("name", sorted(_builtin()))
def test_every_pass_has_a_page_equal_to_its_docstring(name: str) -> None:
    page = PASS_DOCS / f"{name}.md"
    assert page.is_file(), f"no {page}: run python tools/pass_docs.py"
    cls = _builtin()[name]
    assert page.read_text() == pass_markdown(cls), f"{page} is stale: run python tools/pass_docs.py"
    info = describe_pass(cls)
    assert info.summary in page.read_text()
    for option in info.options:
        assert f"`{option.name}`" in page.read_text()


def test_no_page_for_a_pass_that_does_not_exist() -> None:
    pages = {p.stem for p in PASS_DOCS.glob("*.md")}
    assert pages == set(_builtin())


def test_the_readme_names_every_pass_and_links_its_page() -> None:
    text = README.read_text()
    for name in _builtin():
        assert f"(docs/passes/{name}.md)" in text, name


def test_every_file_the_readme_names_exists() -> None:
    """Issue 21 item 10: every link and every document named (``docs/onnx.md``) is in the
    repository (the README named a STYLE.md it does not have)."""
    text = README.read_text()
    linked = re.findall(r"\]\(([^)#\s:]+)\)", text)
    named = re.findall(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.md)\b", text)
    assert [n for n in dict.fromkeys([*linked, *named]) if not (REPO / n).exists()] == []


def test_the_folder_the_readme_writes_into_is_ignored_by_git() -> None:
    """Issue 21 item 10: the tour writes ``out/``; git does not offer it for a commit."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    done = subprocess.run(
        ["git", "check-ignore", "-q", "out/tiny_export/predict_net.pbtxt"], cwd=REPO, check=False
    )
    assert done.returncode == 0


def test_no_file_names_a_path_of_one_machine() -> None:
    """Issue 21 item 11: scripts and documents name paths relative to the repository (or
    ``$GRAPHTOOLS_REAL_FIXTURES``), never a folder of the machine they were written on."""
    pattern = re.compile(r"(?<![\w.])/(?:work|home|Users|root)/")
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for folder in ("benchmarks", "tools", "docs", "graphtools", "passes", "tests")
        for path in sorted((REPO / folder).rglob("*"))
        if path.suffix in (".py", ".md") and "__pycache__" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line) and "pattern = re.compile" not in line
    ]
    found += [
        f"README.md:{n}"
        for n, line in enumerate(README.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_every_package_is_listed_for_a_non_editable_install() -> None:
    """The set-up's ``pip install .`` installs only the packages pyproject.toml lists: a new
    sub-package (``graphtools.feeds``, ``graphtools.extract``) must be among them."""
    import tomllib

    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(("graphtools", *path.parent.relative_to(REPO / "graphtools").parts))
        for path in (REPO / "graphtools").rglob("__init__.py")
        if "__pycache__" not in path.parts
    }
    assert found - listed == set()


def test_the_setup_section_keeps_its_two_commands() -> None:
    setup = README.read_text().split("## Set-up", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", setup, re.S)
    ci_test_line = next(
        line for line in (REPO / ".ci" / "run").read_text().splitlines() if "pytest" in line
    )
    assert [b.strip() for b in blocks] == [
        "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/graphtools run "
        "fixtures/models/tiny_export -o out/tiny_export",
        'python3 -m venv .venv && .venv/bin/pip install -e ".[test,torch]" && '
        ".venv/bin/pytest -n 2",
    ]
    assert blocks[1].strip() == ci_test_line


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the repository's fixtures, where the README's examples write ``out/``."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "fixtures").symlink_to(REPO / "fixtures")
    return folder


def test_every_readme_command_runs(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In order, as written, from the folder where ``fixtures/`` is (in this process: the
    console script itself is run by tests/test_cli.py; batch commands still start one
    process per model)."""
    commands = _commands()
    assert len(commands) > 20
    monkeypatch.chdir(workdir)
    for line in commands:
        code, out, err = run_cli(capsys, *_split(line)[1:])
        allowed = {0, 1} if line.startswith("graphtools diff") else {0}
        assert code in allowed, f"{line}\n{out}\n{err}"


def _split(line: str) -> list[str]:
    import shlex

    return shlex.split(line)


_RECORDING = """
import builtins, io, json, sys
source, record = sys.argv[1], sys.argv[2]
printed = []
real = builtins.print
def recording(*args, **kwargs):
    frame = sys._getframe(1)
    if frame.f_code.co_filename == "<readme>":
        text = io.StringIO()
        real(*args, **{**kwargs, "file": text})
        printed.append((frame.f_lineno, text.getvalue()))
    real(*args, **kwargs)
builtins.print = recording
try:
    exec(compile(open(source).read(), "<readme>", "exec"), {"__name__": "__main__"})
finally:
    with open(record, "w") as out:
        json.dump(printed, out)
"""

_PRINT_WITH_COMMENT = re.compile(r"^\s*print\(.*\)\s+#\s*(.+)$")


def test_every_readme_python_example_runs(workdir: Path) -> None:
    """Each block runs as written, and each ``print(...)  # TEXT`` prints ``TEXT`` (or what
    ``TEXT`` says before ``: why``): the README's claimed outputs are checked, not only run."""
    blocks = _blocks("python")
    assert len(blocks) >= 4
    assert _run_python_examples(blocks, workdir, "readme") >= 3


@pytest.mark.parametrize("page", ["gradients.md", "recurrent.md"])
def test_the_guides_python_examples_run(workdir: Path, page: str) -> None:
    """The guides' examples too (``docs/onnx.md``'s start from the reader's own model)."""
    blocks = _blocks("python", REPO / "docs" / page)
    assert blocks
    assert _run_python_examples(blocks, workdir, Path(page).stem) >= 1


def _run_python_examples(blocks: list[str], workdir: Path, label: str) -> int:
    """Run ``blocks`` as the README test says; returns how many printed claims were checked."""
    checked = 0
    for number, block in enumerate(blocks):
        record = workdir / f"printed_{label}{number}.json"
        if "def test_" in block:
            test_file = workdir / "test_readme_example.py"
            test_file.write_text(block)
            argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]
        else:
            source = workdir / f"example_{label}{number}.py"
            source.write_text(block)
            argv = [sys.executable, "-c", _RECORDING, str(source), str(record)]
        done = subprocess.run(
            argv, cwd=workdir, capture_output=True, text=True, timeout=300, check=False
        )
        if "golden.check(" in block:  # the first run writes the golden and fails, as it says
            assert done.returncode == 1 and "it was written" in done.stdout, done.stdout
            done = subprocess.run(
                argv, cwd=workdir, capture_output=True, text=True, timeout=300, check=False
            )
        assert done.returncode == 0, f"{block}\n{done.stdout}\n{done.stderr}"
        assert "Warning" not in done.stderr, f"{block}\n{done.stderr}"  # none the text hides
        if "def test_" in block:
            continue
        printed = dict(json.loads(record.read_text()))
        for line_number, line in enumerate(block.splitlines(), 1):
            claimed = _PRINT_WITH_COMMENT.match(line)
            if claimed is None:
                continue
            text = printed[line_number].rstrip("\n")
            comment = claimed.group(1)
            assert comment == text or comment.startswith(text + ": "), (line, text)
            checked += 1
    return checked


def _differentiable_pair(folder: Path) -> Path:
    """FC -> Relu -> FC -> Sigmoid with its init_net (the bundled export copies between
    devices, which have no gradient)."""
    from graphtools.ir import Model, Net, Op
    from graphtools.serde import save_model

    def fill(name: str, shape: list[int]) -> Op:
        values = [0.1 * (i % 7 - 3) for i in range(math.prod(shape))]
        return Op("GivenTensorFill", [], [name], args={"shape": shape, "values": values})

    params = {"w1": [4, 3], "b1": [4], "w2": [2, 4], "b2": [2]}
    predict = Net(
        [
            Op("FC", ["data", "w1", "b1"], ["h"]),
            Op("Relu", ["h"], ["h"]),
            Op("FC", ["h", "w2", "b2"], ["logits"]),
            Op("Sigmoid", ["logits"], ["prob"]),
        ],
        ["data", *params],
        ["prob"],
        name="mlp",
    )
    init = Net([fill(name, shape) for name, shape in params.items()], [], list(params))
    save_model(Model(predict, init), folder)
    (folder / "shapes.txt").write_text("data=2x3\n")
    return folder


def test_every_pass_page_s_commands_run(
    workdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Use section of each pass page, with its placeholders filled in (a small
    differentiable pair, an export of the bundled one), runs and exits 0: the pages showed
    spellings missing a required option, and conversions ``run`` cannot write."""
    from graphtools.pass_infra.describe import use_commands

    pair = _differentiable_pair(tmp_path / "pair")
    onnx_model = tmp_path / "tiny.onnx"
    assert (
        run_cli(
            capsys, "export-onnx", str(REPO / "fixtures/models/tiny_export"), "-o", str(onnx_model)
        )[0]
        == 0
    )
    for name, cls in sorted(_builtin().items()):
        for number, command in enumerate(use_commands(cls)):
            assert command in (PASS_DOCS / f"{name}.md").read_text()
            out = str(tmp_path / f"out_{name}_{number}")
            filled = {"MODEL.onnx": str(onnx_model), "PAIR": str(pair), "MODEL": str(pair)}
            argv = [filled.get(a, a.replace("OUT", out)) for a in _split(command)[1:]]
            code, _, err = run_cli(capsys, *argv)
            assert code == 0, f"{command}\n{err}"
