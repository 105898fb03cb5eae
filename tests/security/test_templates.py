"""Templates read files only from the spec's `templates:` folder, inside the project, by constant
names; a symlink or a path out of it is refused (batchor/spec/templates.py)."""

from __future__ import annotations

import pytest

from batchor import api
from batchor.errors import TemplateIncludeError, problems_of
from tests.security.hostile import SECRET, project, write_job  # noqa: F401 - the fixture


def _with_prompt(project, prompt: str, **changes):
    return write_job(project, steps={"classify": {"prompt": prompt}}, **changes)


@pytest.fixture
def templates(project):
    folder = project / "templates"
    folder.mkdir()
    (folder / "review.j2").write_text("Review: {{ row.text }}", encoding="utf-8")
    (folder / "macros.j2").write_text("{% macro shout(t) %}{{ t | upper }}{% endmacro %}", encoding="utf-8")
    (folder / "link.j2").symlink_to(project.parent / "outside" / "secret.txt")
    (project / "beside.j2").write_text("in the project, not in templates/", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    "prompt",
    [
        "{% include '../outside/secret.txt' %}",
        "{% include '/etc/passwd' %}",
        "{% include 'spec.yaml' %}",
    ],
)
def test_without_a_templates_folder_nothing_is_included(project, prompt):
    with pytest.raises(TemplateIncludeError) as exc:
        api.plan(_with_prompt(project, prompt))
    assert exc.value.code == "template_include" and "templates:" in exc.value.hint


@pytest.mark.parametrize(
    "prompt",
    [
        "{% include '../beside.j2' %}",
        "{% include '../../outside/secret.txt' %}",
        "{% include 'link.j2' %}",  # a symlink out of the folder
        "{% include '" + "/etc/passwd" + "' %}",
        "{% import '../beside.j2' as m %}{{ m }}",
        "{% from 'link.j2' import x %}{{ x }}",
        "{% include row.text %}",  # the data must not choose the file
        "{% include ['missing.j2', '../beside.j2'] %}",
    ],
)
def test_includes_stay_inside_the_templates_folder(project, templates, prompt):
    with pytest.raises(TemplateIncludeError) as exc:
        api.plan(_with_prompt(project, prompt, templates="templates"))
    assert all(p.code == "template_include" for p in problems_of(exc.value))
    assert SECRET not in str(exc.value)


def test_a_templates_folder_outside_the_project_is_refused(project):
    with pytest.raises(TemplateIncludeError):
        api.plan(_with_prompt(project, "{% include 'secret.txt' %}", templates="../outside"))


def test_includes_and_imports_from_the_templates_folder_work(project, templates):
    prompt = "{% import 'macros.j2' as m %}{{ m.shout('x') }} {% include 'review.j2' %}"
    result = api.apply(_with_prompt(project, prompt, templates="templates"))
    assert result.status == "succeeded" and result.succeeded == 3
