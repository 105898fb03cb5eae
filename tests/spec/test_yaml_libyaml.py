"""Specs are composed by libyaml when PyYAML has it: data, key lines, text lines and problems are
the same as the pure-Python parser gives, and malformed YAML reads the same."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from batchor.errors import SpecYamlError
from batchor.spec.yaml_loader import YamlDoc, _Builder, load_yaml

ROOT = Path(__file__).resolve().parents[2]

TRICKY = {
    "ambiguous scalars": "a: NO\nb: on\nc: 012\nd: 1_000\ne: 1:30\nf: 'NO'\ng: \"012\"\nh: true\ni: 0.5\n",
    "block text": (
        "steps:\n  s:\n    prompt: |\n      line one\n      line two\n    system: >\n      folded\n      text\n"
    ),
    "duplicates and merge": "base: &b {x: 1}\nk: 1\nk: 2\nm:\n  <<: *b\n  y: 2\n",
    "environment": "key: ${BATCHOR_TEST_UNSET_VAR:-fallback}\nmissing: ${BATCHOR_TEST_UNSET_VAR}\nlit: $$x\n",
    "flow, unicode, comments": (
        "# c\nlist: [1, 'two', {three: 3}]\ntext: \"héllo ✓ 😀\"  # trailing\nempty:\nnull_v: ~\n"
    ),
    "multi-line plain, CRLF": "a: one\r\n  two\r\nb:\r\n  - x\r\n  - y\r\n",
}


def _pure(text: str, source: str) -> YamlDoc:
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    builder = _Builder(source)
    data = builder.build(node, ()) if node is not None else None
    return YamlDoc(data, builder.lines, builder.text_lines, builder.problems)


def _same(doc: YamlDoc, pure: YamlDoc) -> None:
    assert (doc.data, doc.lines, doc.text_lines) == (pure.data, pure.lines, pure.text_lines)
    assert [(type(p), p.message) for p in doc.problems] == [(type(p), p.message) for p in pure.problems]


def test_pyyaml_has_libyaml_here():
    assert getattr(yaml, "__with_libyaml__", False)  # else the fast path is not exercised


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_tricky_yaml_reads_as_the_pure_parser_reads_it(name):
    _same(load_yaml(TRICKY[name], "spec.yaml"), _pure(TRICKY[name], "spec.yaml"))


def test_committed_specs_read_as_the_pure_parser_reads_them():
    specs = sorted((ROOT / "specs").glob("*.yaml")) + sorted((ROOT / "examples").rglob("*.yaml"))
    assert specs
    for spec in specs:
        text = spec.read_text(encoding="utf-8")
        _same(load_yaml(text, str(spec)), _pure(text, str(spec)))


def test_malformed_yaml_names_where_the_bracket_opened_and_where_the_parser_stopped():
    text = "a: 1\nb: [unclosed\nc: 2\n"
    with pytest.raises(yaml.YAMLError) as pure:
        yaml.compose(text, Loader=yaml.SafeLoader)
    with pytest.raises(SpecYamlError) as info:
        load_yaml(text, "spec.yaml")
    assert info.value.message == (
        f"spec.yaml:2: malformed YAML: {pure.value.context} from line 2: {pure.value.problem} on line 3"
    )


def test_an_unclosed_quote_is_reported_on_its_own_line():
    """The quote opened on line 12 runs on to the next quote; the parser stops lines later. The
    error names line 12 first (it used to name only where the parser gave up)."""
    lines = ["version: 1", "name: x", "input:", "  path: data.csv", "model:", "  provider: mock", "  name: m"]
    lines += ["steps:", "  first:", "    system: hi", "  second:"]
    lines += ['    prompt: "Review: {{ row.text }}', "  third:", '    prompt: "ok"', "output:", "  path: o.csv", ""]
    text = "\n".join(lines)
    assert lines[11].startswith('    prompt: "Review')
    with pytest.raises(SpecYamlError) as info:
        load_yaml(text, "spec.yaml")
    assert info.value.message.startswith("spec.yaml:12: malformed YAML: the quote opened on line 12 is not closed")
    assert "on line 14" in info.value.message  # where the parser stopped is still named

    with pytest.raises(SpecYamlError) as at_end:
        load_yaml('a: 1\nb: "never closed\nc: 2\n\n\n', "spec.yaml")
    assert at_end.value.message.startswith("spec.yaml:2: malformed YAML:")
