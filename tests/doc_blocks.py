"""The fenced code blocks of the README, docs/*.md and config/README.md, and what each
one's info string says about how it is checked (tests/test_docs_blocks.py).

A block's info string is its language followed by marks, ``key=value`` or a bare key:

- ``yaml config``: a whole config; ``yaml over=config/X.yaml``: a fragment that a user
  merges into that config (as Snakemake merges a ``--configfile``: mappings key by key).
- ``bash run`` / ``python run``: run as written (``vqarobust`` against a finished tiny run,
  ``snakemake`` as a dry run); ``python run given=image,pool``: the test supplies those
  names.
- ``covered-by=tests/...``: a test of its own runs it (the whole study, the cluster).
- ``needs=...``: what this machine lacks to run it (e.g. ``needs=cuda``), said in the doc.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import REPO

DOCS = (
    "README.md",
    *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")),
    "config/README.md",
)
CHECKED = ("yaml", "bash", "python")
MARKS = {"config", "over", "run", "given", "covered-by", "needs", "snakefile"}
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", flags=re.S | re.M)


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its marks and its text."""

    doc: str
    line: int
    lang: str
    marks: dict[str, str] = field(default_factory=dict)
    text: str = ""

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(docs: tuple[str, ...] = DOCS) -> list[Block]:
    """Every fenced block of ``docs`` (paths relative to the repository)."""
    found = []
    for doc in docs:
        text = (REPO / doc).read_text()
        for m in _FENCE.finditer(text):
            lang, *words = m.group(1).split() or [""]
            marks = dict(w.partition("=")[::2] for w in words)
            line = text.count("\n", 0, m.start()) + 1
            found.append(Block(doc, line, lang, marks, m.group(2)))
    return found


def checked(lang: str) -> list[Block]:
    """The blocks of ``lang`` that a test runs or validates (not ``covered-by`` elsewhere
    and not ``needs`` something absent)."""
    return [
        b
        for b in blocks()
        if b.lang == lang and not ({"covered-by", "needs", "snakefile"} & b.marks.keys())
    ]


def merge(base: dict[str, Any], fragment: dict[str, Any]) -> dict[str, Any]:
    """``fragment`` merged into ``base`` mapping by mapping (Snakemake's ``--configfile``
    update); lists and scalars replace."""
    out = dict(base)
    for key, value in fragment.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def commands(text: str) -> list[list[str]]:
    """A shell block's commands as argument lists: continuations joined, comments dropped,
    ``&&`` chains split."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out: list[list[str]] = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            out.append(words[:cut])
            words = words[cut + 1 :]
    return [c for c in out if c]


def program(argv: list[str]) -> str:
    """The program a command runs, without the venv's ``.venv/bin/`` prefix."""
    return Path(argv[0]).name if argv[0].startswith(".venv/bin/") else argv[0]


def sandbox(tmp: Path) -> Path:
    """A working directory that looks like a checkout (the workflow's files linked, no
    results), for the docs' commands that copy a config or plan a run."""
    private = {".git", ".venv", ".snakemake", "results", "tests", "resources"}
    for item in REPO.iterdir():
        if item.name not in private and not item.name.startswith((".pytest", ".ruff", ".hyp")):
            (tmp / item.name).symlink_to(item)
    return tmp


def run_commands(block_text: str, cwd: Path, substitute: dict[str, str] | None = None) -> list:
    """Run a shell block's commands in ``cwd``: ``cp`` copies, ``$EDITOR`` leaves the copy
    as it is, ``snakemake`` plans (a dry run), ``vqarobust`` runs. Returns the
    (command, exit code, output) of each; none may print a traceback."""
    done = []
    for argv in commands(block_text):
        argv = [substitute.get(w, w) for w in argv] if substitute else argv
        name = program(argv)
        if name == "$EDITOR":
            continue
        if name == "cp":
            (cwd / argv[2]).write_bytes((cwd / argv[1]).read_bytes())
            continue
        if name == "snakemake":
            cmd = [sys.executable, "-m", "snakemake", *argv[1:], "-n", "--quiet"]
        elif name == "vqarobust":
            cmd = [sys.executable, "-m", "vqarobust.cli", *argv[1:]]
        else:
            raise AssertionError(f"the docs test does not know how to run {argv[0]!r}")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0 and "Traceback" not in out, f"{' '.join(argv)}:\n{out[-3000:]}"
        done.append((argv, proc.returncode, out))
    return done
