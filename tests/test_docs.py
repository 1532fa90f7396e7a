"""Every example in README.md and docs/ (guide, identify, design, diff) runs: ```python blocks are executed in order in one
namespace per file, and each ``fp16emu`` command of a ```console / ```bash / ```sh block is run
through :func:`validation.cli.main` (exit code 0, or the ``# exit N`` its line ends with). A block
preceded by ``<!-- slow -->`` is marked slow; commands naming ``../shared`` skip without it.
Files are written in a temporary folder; ``../shared`` is the reference folder beside the clone."""

import os
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
# a GPU's probe outputs are shown with fp16emu's emulation standing in for the device
# (`fp16emu probe --emulate UNIT`, probe_gpu.run_file with an emulated backend); the GPU commands
# themselves sit in ```text blocks, which are not run
DOCS = [
    ROOT / "README.md",
    ROOT / "docs" / "guide.md",
    ROOT / "docs" / "identify.md",
    ROOT / "docs" / "design.md",
    ROOT / "docs" / "diff.md",
]
FENCE = re.compile(r"(<!-- slow -->\s*\n)?```(\w+)\n(.*?)```", re.S)


def blocks(path: Path):
    """(kind, text, slow) for each fenced block of ``path`` that runs."""
    out = []
    for m in FENCE.finditer(path.read_text(encoding="utf-8")):
        slow, lang, text = bool(m.group(1)), m.group(2), m.group(3)
        if lang == "python":
            out.append(("python", text, slow))
        elif lang in ("console", "bash", "sh"):
            for line in text.splitlines():
                cmd = line.strip().removeprefix("$ ")
                if cmd.startswith("fp16emu "):
                    out.append(("cli", cmd, slow))
    return out


def _cases():
    for path in DOCS:
        if not path.exists():
            continue
        runnable = blocks(path)
        slow = any(s for _, _, s in runnable)
        marks = [pytest.mark.slow] if slow else []
        yield pytest.param(path, marks=marks, id=path.relative_to(ROOT).as_posix())


def _run_cli(cmd: str) -> None:
    from validation.cli import main

    text, _, comment = cmd.partition(" # ")
    want = int(m.group(1)) if (m := re.search(r"exit (\d)", comment)) else 0
    argv = shlex.split(text.replace("../shared", str(SHARED)))[1:]
    code = main(argv)
    assert code == want, f"{cmd}: exit {code}, expected {want}"


@pytest.mark.parametrize("path", list(_cases()))
def test_every_example_runs(path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    runnable = blocks(path)
    assert runnable, f"{path.name}: no runnable example"
    namespace: dict = {"__name__": "__docs__"}
    # console blocks may use files a later python block writes (README: compare): run python first
    for kind, text, _ in sorted(runnable, key=lambda b: b[0] != "python"):
        if kind == "python":
            exec(compile(text, f"{path.name}:python", "exec"), namespace)  # noqa: S102
        else:
            if "../shared" in text and not SHARED.is_dir():
                continue  # the reference data is not beside the clone
            _run_cli(text)
    capsys.readouterr()


def test_examples_are_found():
    readme = blocks(ROOT / "README.md")
    assert sum(k == "cli" for k, _, _ in readme) >= 8 and sum(k == "python" for k, _, _ in readme) >= 2
    for name, python, cli in (("identify.md", 1, 6), ("design.md", 1, 7), ("diff.md", 1, 3)):
        found = blocks(ROOT / "docs" / name)
        assert sum(k == "python" for k, _, _ in found) >= python and sum(k == "cli" for k, _, _ in found) >= cli, name
    assert sys.version_info >= (3, 10) and os.sep
