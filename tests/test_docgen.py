"""docs/data-model.md is generated from the reference schemas and must not drift from them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from otap_model import SIGNAL_PAYLOADS, annotation, reference_schema
from otap_model.docgen import render

DOC = Path(__file__).resolve().parents[1] / "docs" / "data-model.md"


def test_committed_page_equals_generator_output() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), "run `make docs` to regenerate docs/data-model.md"


def test_module_entry_point_prints_the_page() -> None:
    out = subprocess.run([sys.executable, "-m", "otap_model.docgen"], capture_output=True, check=True, text=True)
    assert out.stdout == render()


def _leaves(field: pa.Field) -> list[pa.Field]:
    t = field.type
    if pa.types.is_struct(t):
        return [field] + [f for i in range(t.num_fields) for f in _leaves(t.field(i))]
    if pa.types.is_list(t) and pa.types.is_struct(t.value_type):
        return [field] + [f for i in range(t.value_type.num_fields) for f in _leaves(t.value_type.field(i))]
    return [field]


def test_every_payload_column_and_annotation_is_documented() -> None:
    page = render()
    sections = page.split("\n### ")[1:]
    by_title = {s.split("\n", 1)[0]: s for s in sections}
    documented = {pt for members in SIGNAL_PAYLOADS.values() for pt in members}
    assert set(by_title) == {f"{pt.name} ({int(pt)})" for pt in documented}
    for pt in documented:
        section = by_title[f"{pt.name} ({int(pt)})"]
        rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line.split("|")[1]]
        rows = [r for r in rows if "`[]`" not in r]  # list item rows carry no field of their own
        fields = [f for top in reference_schema(pt) for f in _leaves(top)]
        assert len(rows) == len(fields), pt.name
        for field, row in zip(fields, rows):
            assert row.split("|")[1].strip().endswith(f"`{field.name}`"), (pt.name, field.name, row)
            ann = annotation(field)
            assert ("optional" if ann.optional or field.nullable else "required") in row
            if ann.dictionary:
                assert {8: "u8 → u16", 16: "u16 → plain"}[ann.dictionary] in row
            if ann.encoding:
                assert ann.encoding in row
