"""The examples in README.md and docs/user-guide.md run, and print what the page says they print.

Convention (in the Markdown source):

* a ```python block on the line right after ``<!-- runnable -->`` is run;
* a ```text block right after ``<!-- output -->`` that follows a runnable block (blank lines and
  one line of prose may sit between them) is its expected standard output. ``...`` inside a line
  matches any text; a line holding only ``...`` matches any number of lines.
* ``<!-- output approx -->`` instead lets every number differ by up to 3 % (sizes of compressed
  encoder output move with every change to the encoder's dictionaries; text, counts of lines and
  small numbers still have to match).

The blocks of one page run in order, each in its own interpreter, in one temporary directory per
page, so an example may use the files an earlier example on the same page wrote.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/user-guide.md")
RUNNABLE, OUTPUT, APPROX = "<!-- runnable -->", "<!-- output -->", "<!-- output approx -->"
TOLERANCE = 0.03
NUMBER = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
TIMEOUT = 120  # seconds per block; each takes about one second


@dataclass
class Example:
    page: str
    line: int  # 1-based line of the opening fence
    code: str
    expected: str | None
    tolerance: float = 0.0


def _fenced(lines: list[str], start: int, language: str, page: str) -> tuple[str, int]:
    """The body of the fence opening at `start` (which must be ```language) and the line after it."""
    if lines[start].strip() != f"```{language}":
        raise AssertionError(f"{page}:{start + 1}: expected a ```{language} block right after the marker")
    for end in range(start + 1, len(lines)):
        if lines[end].strip() == "```":
            return "\n".join(lines[start + 1 : end]) + "\n", end + 1
    raise AssertionError(f"{page}:{start + 1}: unterminated ```{language} block")


def examples(page: str) -> list[Example]:
    lines = (ROOT / page).read_text().splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != RUNNABLE:
            i += 1
            continue
        fence = i + 1
        code, i = _fenced(lines, fence, "python", page)
        example = Example(page, fence + 1, code, None)
        j = i
        markers = (OUTPUT, APPROX, RUNNABLE)
        while j < len(lines) and j <= i + 3 and lines[j].strip() not in markers and not lines[j].startswith("#"):
            j += 1
        if j < len(lines) and lines[j].strip() in (OUTPUT, APPROX):
            example.tolerance = TOLERANCE if lines[j].strip() == APPROX else 0.0
            example.expected, i = _fenced(lines, j + 1, "text", page)
        found.append(example)
    return found


def _pattern(text: str, approx: bool, numbers: list[float]) -> str:
    """Regex of literal text; with `approx`, each number becomes a group (its value kept in `numbers`)."""
    if not approx:
        return re.escape(text)
    out, last = [], 0
    for m in NUMBER.finditer(text):
        out += [re.escape(text[last : m.start()]), f"({NUMBER.pattern})"]
        numbers.append(float(m.group().replace(",", "")))
        last = m.end()
    return "".join([*out, re.escape(text[last:])])


def matches(expected: str, actual: str, tolerance: float = 0.0) -> bool:
    """Whole-output match with the ``...`` wildcards and number tolerance of the module docstring."""
    parts: list[str] = []
    numbers: list[float] = []
    for line in expected.rstrip("\n").splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            pieces = [_pattern(p, tolerance > 0, numbers) for p in line.rstrip().split("...")]
            parts.append("[^\n]*?".join(pieces) + r"[ \t]*\n")
    normalized = "".join(line.rstrip() + "\n" for line in actual.splitlines())
    found = re.fullmatch("".join(parts), normalized)
    if found is None:
        return False
    got = [float(g.replace(",", "")) for g in found.groups()]
    return all(abs(g - want) <= tolerance * abs(want) for g, want in zip(got, numbers, strict=True))


def test_pages_mark_their_examples():
    counts = {page: len(examples(page)) for page in PAGES}
    assert counts["README.md"] >= 1 and counts["docs/user-guide.md"] >= 10, counts
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme


def test_wildcards():
    assert matches("a ... c\n...\nend\n", "a b c\nx\ny\nend\n")
    assert matches("a\n...\nb\n", "a\nb\n")
    assert not matches("a 1\n", "a 12\n")
    assert not matches("a\n", "a\nb\n")
    assert matches("size 1,000 (2, 3)\n", "size 1,020 (2, 3)\n", 0.03)
    assert not matches("size 1,000 (2, 3)\n", "size 1,040 (2, 3)\n", 0.03)
    assert not matches("size 1,000 (2, 3)\n", "size 1,000 (2, 4)\n", 0.03)
    assert not matches("size 1,000\n", "size 1,020\n")


STORE_OPENED = re.compile(r"""QuiverStore\.open\(\s*["']([^"']+)["']""")
PIPELINE_STORE = re.compile(r"--store\s+([^\s`'\]]+)")


def test_examples_open_no_store_the_pipeline_commands_write():
    """Was (fresh-user review 26): the README quick start opened `store` and left its subscriber
    `exporter` there, and the README's command line ran `pipeline --store store/`: that subscriber,
    never coming back, pinned the pipeline's segments until its orphan timeout."""
    opened = {name.rstrip("/") for page in PAGES for e in examples(page) for name in STORE_OPENED.findall(e.code)}
    written = {name.rstrip("/") for page in PAGES for name in PIPELINE_STORE.findall((ROOT / page).read_text())}
    assert opened and written
    assert not opened & written, f"examples open a store the pipeline commands of the pages write into: {opened & written}"


@pytest.mark.parametrize("page", PAGES)
def test_examples_run(page, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    for example in examples(page):
        where = f"{page}:{example.line}"
        try:
            done = subprocess.run(
                [sys.executable, "-c", example.code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"{where}: the example ran longer than {TIMEOUT} s")
        assert done.returncode == 0, f"{where}: the example failed (exit {done.returncode}):\n{done.stderr}"
        if example.expected is not None:
            assert matches(example.expected, done.stdout, example.tolerance), (
                f"{where}: the example printed\n{done.stdout}\nbut the page says\n{example.expected}"
            )
