"""A process compiles each template once (Jinja's compile is the bulk of a small plan's template
work, and a pilot or `plan` then `apply` compiles the same step several times), and a cached
template still reads an included file again once it changes."""

from __future__ import annotations

import os

from batchor.spec.templates import compile_step, make_environment


def test_the_same_step_compiled_twice_reuses_the_compiled_template(tmp_path):
    env = make_environment(tmp_path)
    first = compile_step(env, "classify", "Be brief.", "Review: {{ row.text }}", None, set())
    again = compile_step(make_environment(tmp_path), "classify", "Be brief.", "Review: {{ row.text }}", None, set())
    assert again.prompt is first.prompt and again.system is first.system
    other = compile_step(env, "classify", "Be brief.", "Text: {{ row.text }}", None, set())
    assert other.prompt is not first.prompt
    assert other.prompt.render(row={"text": "ok"}) == "Text: ok"


def test_a_cached_template_reads_its_include_again_after_it_changes(tmp_path):
    included = tmp_path / "review.j2"
    included.write_text("Old: {{ row.text }}", encoding="utf-8")
    prompt = "{% include 'review.j2' %}"
    step = compile_step(make_environment(tmp_path), "s", None, prompt, None, set())
    assert step.prompt.render(row={"text": "x"}) == "Old: x"
    included.write_text("New: {{ row.text }}", encoding="utf-8")
    stat = included.stat()
    os.utime(included, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a later edit
    again = compile_step(make_environment(tmp_path), "s", None, prompt, None, set())
    assert again.prompt.render(row={"text": "x"}) == "New: x"
