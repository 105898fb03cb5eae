"""`batchor draft`: one sentence and a data file in, a spec that validates and rehearses out.

The loop: a model (or, with `mock`, a template) drafts `{spec, output_schema}`; batchor places it
(input on the data file, schema in its file) in a scratch folder and checks it exactly as a user's
spec is checked: `validate` (spec model, type-checked templates, model and price), then a rehearsal
of a few rows through the mock provider (scratch state and output: nothing real is touched). The
problems go back to the model with its draft, at most `attempts` times in all. A draft that
passes is planned for the full data with its real model (the cost estimate), and only then, if
`confirm` agrees, written.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchor import api
from batchor.draft import ask, files
from batchor.draft.sample import DataSample, read_sample
from batchor.draft.template import template_draft
from batchor.errors import BatchorError, DraftInvalidError, NoApiKeyError, problems_of
from batchor.humanize import money
from batchor.plan.plan_file import CompiledPlan
from batchor.result import Result
from batchor.scaffold import editor_project
from batchor.spec.json_schema import editor_schema

REHEARSAL_ROWS = 3
# (key variable, model that drafts, model the drafted spec uses): the first key set picks the provider.
DRAFTERS = (
    ("OPENAI_API_KEY", "openai:gpt-4.1", "gpt-4.1-mini"),
    ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5", "claude-haiku-4-5"),
    ("GEMINI_API_KEY", "gemini:gemini-2.5-flash", "gemini-2.5-flash"),
    ("GOOGLE_API_KEY", "gemini:gemini-2.5-flash", "gemini-2.5-flash"),
)
SPEC_MODELS = {drafter.split(":")[0]: model for _, drafter, model in DRAFTERS}


@dataclass
class DraftRequest:
    task: str
    data: Path
    output: Path
    model: str | None = None  # provider:name that drafts (default: by the API key set)
    mock: bool = False  # a template draft from the columns, offline: a rehearsal of the flow
    rows: int = 5  # sample rows shown to the model (0: header and types only)
    attempts: int = 3
    force: bool = False
    fresh: bool = False  # ask again even if this exact request has a cached answer
    max_cost: float | None = None  # USD for all drafting calls: each is refused if it could pass what is left
    state: str | None = None


@dataclass
class Attempt:
    number: int
    run_id: str | None  # the drafter's run (None for a template draft)
    cost_usd: float
    problems: list[str] = field(default_factory=list)
    last: bool = False  # no attempt follows: its problems go back to nobody


@dataclass
class Draft:
    """A checked draft: its files' text, the rehearsal, the plan, and what drafting cost."""

    request: DraftRequest
    drafter: str  # provider:name, or "template" with mock
    spec_text: str
    schema_text: str | None  # None: the spec uses no schema file
    attempts: list[Attempt]
    rehearsal: Result
    plan: CompiledPlan
    sample: DataSample
    schema_name: str = "output.schema.json"  # the schema file's name, beside the spec
    written: list[Path] = field(default_factory=list)

    @property
    def cost_usd(self) -> float:
        return sum(a.cost_usd for a in self.attempts)

    @property
    def outputs(self) -> dict[Path, str]:
        """File -> text, for the spec, (when it uses one) its schema file, and the spec format's
        schema its editor modeline names (generated: refreshed to the installed version's)."""
        out = {self.request.output: self.spec_text}
        if self.schema_text is not None:
            out[self.request.output.with_name(self.schema_name)] = self.schema_text
        editor_file, editor_text, _ = _editor_schema(self.request)
        out[editor_file] = editor_text
        return out


def drafter_for(model: str | None, mock: bool) -> tuple[str, tuple[str, str]]:
    """(who drafts, (provider, model) the spec will use)."""
    if model:
        provider = model.split(":", 1)[0]
        return ("template" if mock else model), (provider, SPEC_MODELS.get(provider, model.split(":", 1)[-1]))
    for env, drafter, spec_model in DRAFTERS:
        if os.environ.get(env):
            return ("template" if mock else drafter), (drafter.split(":")[0], spec_model)
    if mock:
        return "template", ("openai", SPEC_MODELS["openai"])
    raise NoApiKeyError(
        "draft needs a model to draft with: no OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY is set",
        hint="set one of them, pass --model provider:name, or --mock for an offline template draft (a rehearsal)",
    )


def draft(
    request: DraftRequest,
    *,
    confirm: Callable[[Draft], bool] | None = None,
    on_attempt: Callable[[Attempt], None] | None = None,
) -> Draft:
    """Draft, check (re-asking with the problems), rehearse, plan; write when `confirm` agrees."""
    if ":" not in (request.model or ":"):
        raise BatchorError(f"--model '{request.model}' must be provider:name", hint="e.g. --model openai:gpt-4.1")
    files.refuse_existing([request.output], request.force)
    drafter, spec_model = drafter_for(request.model, request.mock)
    sample = read_sample(request.data, request.rows)
    with tempfile.TemporaryDirectory(prefix="batchor-draft-check-") as scratch:
        result = _draft_loop(request, drafter, spec_model, sample, Path(scratch), on_attempt)
    users_files = [path for path in result.outputs if path != _editor_schema(request)[0]]  # that one is ours
    files.refuse_existing(users_files, request.force)  # the schema is named after the drafted job
    if confirm is None or confirm(result):
        files.refuse_existing(users_files, request.force)
        files.write_files(result.outputs)
        result.written = list(result.outputs)
        api.validate(request.output)  # the files as written: the same check the draft passed
    return result


def _draft_loop(
    request: DraftRequest,
    drafter: str,
    spec_model: tuple[str, str],
    sample: DataSample,
    scratch: Path,
    on_attempt: Callable[[Attempt], None] | None,
) -> Draft:
    attempts: list[Attempt] = []
    previous = errors = ""
    for number in range(1, request.attempts + 1):
        if drafter == "template":
            spec, schema, run_id, cost = *template_draft(request.task, sample, spec_model), None, 0.0
        else:
            text = ask.request_text(request.task, sample, spec_model, previous, errors, (number, request.attempts))
            spent = sum(a.cost_usd for a in attempts)
            budget = None if request.max_cost is None else max(0.0, request.max_cost - spent)
            answer = ask.ask_drafter(
                drafter, text, spec_dir=_spec_dir(request), fresh=request.fresh, state=request.state, max_cost=budget
            )
            spec, schema, run_id, cost = answer.spec, answer.output_schema, answer.run_id, answer.cost_usd
        attempt = Attempt(number, run_id, cost, last=number == request.attempts)
        attempts.append(attempt)
        candidate = _Candidate(request, spec, schema)
        checked = candidate.check(scratch / f"attempt-{number}")
        attempt.problems = checked.problems
        if on_attempt:
            on_attempt(attempt)
        if not checked.problems:
            assert checked.rehearsal is not None and checked.plan is not None
            return Draft(
                request,
                drafter,
                candidate.text(),
                candidate.schema_text(),
                attempts,
                checked.rehearsal,
                checked.plan,
                sample,
                candidate.schema_name,
            )
        previous, errors = candidate.text(), "\n".join(checked.problems)
    spent = sum(a.cost_usd for a in attempts)
    raise DraftInvalidError(
        f"no valid draft in {len(attempts)} attempt(s) (drafting cost {money(spent)}); nothing was written. "
        f"Last problems: {'; '.join(attempts[-1].problems)}",
        hint="say more precisely what you want, try another --model, or start from `batchor init`",
    )


def _spec_dir(request: DraftRequest) -> Path:
    return request.output.resolve().parent


def _editor_schema(request: DraftRequest) -> tuple[Path, str, str]:
    return editor_schema(editor_project(_spec_dir(request)), request.output.parent)  # names it as -o did


@dataclass
class _Checked:
    problems: list[str]
    rehearsal: Result | None = None
    plan: CompiledPlan | None = None


@dataclass
class _Candidate:
    """One drafted spec, placed: its input on the data file, its schema in the schema file."""

    request: DraftRequest
    spec: dict[str, Any]
    schema: dict[str, Any]

    def __post_init__(self) -> None:
        self.schema_name = files.schema_path_for(self.request.output, self.spec.get("name")).name
        data = files.relative_data_path(self.request.data, _spec_dir(self.request))
        self.final = files.placed(self.spec, data, self.schema_name)

    def header(self) -> list[str]:
        return [
            _editor_schema(self.request)[2],
            f"Drafted by `batchor draft`: {' '.join(self.request.task.split())}",
            "Read it before you run it: batchor plan " + self.request.output.name,
        ]

    def text(self) -> str:
        return files.spec_yaml(self.final, self.header())

    def schema_text(self) -> str | None:
        return files.schema_json(self.schema) if files.uses_schema_file(self.final, self.schema_name) else None

    def check(self, folder: Path) -> _Checked:
        """`validate`, then a mock rehearsal and the full plan, all in `folder` (nothing real touched)."""
        folder.mkdir(parents=True)
        spec_file = folder / self.request.output.name
        scratch = files.placed(self.spec, str(self.request.data.resolve()), self.schema_name)
        files.write_files(
            {
                spec_file: files.spec_yaml(scratch, self.header()),  # lines as in the final file
                folder / self.schema_name: files.schema_json(self.schema),
            }
        )
        state = str(folder / "state.duckdb")
        try:
            api.validate(spec_file)
            plan = api.plan(spec_file, state=state, save=False)  # before the rehearsal: nothing cached yet
            rehearsal = api.apply(
                spec_file,
                mock=True,
                limit=REHEARSAL_ROWS,
                state=state,
                handle_signals=False,
                output=folder / "rehearsal.jsonl",
                progress=False,
            )
            if rehearsal.status != "succeeded":
                return _Checked(
                    [
                        f"rehearsal with the mock provider: {rehearsal.status}: "
                        f"{rehearsal.stop_reason or _first_error(rehearsal)}"
                    ]
                )
        except BatchorError as exc:
            return _Checked([_problem_text(p, spec_file, self.request.output.name) for p in problems_of(exc)])
        return _Checked([], rehearsal, plan)


def _problem_text(problem: BatchorError, scratch_file: Path, name: str) -> str:
    text = f"error [{problem.code}]: {problem.message}" + (f" (fix: {problem.hint})" if problem.hint else "")
    return text.replace(str(scratch_file), name).replace(str(scratch_file.parent) + os.sep, "")


def _first_error(result: Result) -> str:
    errors = result.errors()
    return str(errors.column("_error")[0]) if errors.num_rows and "_error" in errors.column_names else "no answer"
