"""Provider-neutral heart of the fake Batch APIs: jobs, their life cycle, and row answers.

Each ``*_batch_routes`` module only speaks its provider's wire format; here a job is created
(every submitted row counted per custom_id, so a duplicate submission is visible in stats),
ends after ``batch_polls`` status reads and ``batch_seconds`` (completed, expired with only
``batch_done_fraction`` of its rows answered, or failed as a whole), and each row is answered
by the same code path as a realtime call: fail_matching, fault draws, malformed answers.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from .core import UNASKED_ACTIONS, Fake, Provider, Route, blocked_answer, build_answer, refusal_body, unasked_answer

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}{time.time_ns() % 10**12:012d}{next(_ids):06d}"


@dataclass
class Row:
    custom_id: str
    body: dict[str, Any]
    status: int | None = None  # None: not run (expired/cancelled first)
    payload: dict[str, Any] | None = None  # the answer (200) or the error body


@dataclass
class Job:
    id: str
    provider: str
    route: Route
    rows: list[Row]
    tag: str | None = None  # metadata tag / display name
    created_at: float = field(default_factory=time.time)
    reads: int = 0
    state: str = "running"  # running | cancelling | completed | expired | failed | cancelled
    error_code: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # provider-specific (file ids, model)
    listed_from: int = 0  # the provider's list call from which listings show it (hidden creates)

    @property
    def ended(self) -> bool:
        return self.state in ("completed", "expired", "failed", "cancelled")

    def count(self, status: int) -> int:
        return sum(1 for r in self.rows if r.status == status)


class World:
    """Every batch job and uploaded file of one fake server (kept across stats resets)."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.lists: dict[str, int] = {}  # list calls per provider
        self.files: dict[str, dict[str, Any]] = {}
        self.uploads: dict[str, dict[str, Any]] = {}  # resumable uploads not finalized yet

    def create(self, fake: Fake, job: Job) -> Job:
        for row in job.rows:
            fake.stats.batch_rows[row.custom_id] += 1
        fake.stats.batches_created += 1
        self.jobs[job.id] = job
        if int(fake.config["batch_polls"]) <= 0 and float(fake.config["batch_seconds"]) <= 0:
            finish(fake, PROVIDERS[job.provider], job)
        elif fake.config["batch_answers_ahead"]:
            asyncio.get_running_loop().create_task(answer_ahead(fake, job))
        return job

    async def create_late(self, fake: Fake, job: Job) -> Job:
        """Create `job` and answer `batch_create_delay_s` later. With `batch_create_hidden` the job
        only exists once the delay is over, whether or not the client still waits for the answer
        (a server slow to create it: lookups before then find nothing)."""
        delay = float(fake.config["batch_create_delay_s"])
        late_count = int(fake.config["batch_create_late_count"])
        # Creates asked for so far, this one included (Azure's come in on OpenAI's routes under
        # their own endpoint name: counting by the job's provider missed them, all were late).
        creates = sum(n for name, n in fake.stats.endpoint_calls.items() if name.endswith(".batches.create"))
        if delay <= 0 or (late_count and creates > late_count):
            return self.create(fake, job)
        if not fake.config["batch_create_hidden"]:
            self.create(fake, job)
            await asyncio.sleep(delay)
            return job

        stats = fake.stats
        job.listed_from = self.lists.get(job.provider, 0) + 1 + int(fake.config["batch_create_hidden_lists"])

        async def later() -> Job:
            await asyncio.sleep(delay)
            job.created_at = time.time()
            if fake.stats is not stats:  # the fake was reset for the next test: never leak into it
                return job
            return self.create(fake, job)

        return await asyncio.shield(asyncio.get_running_loop().create_task(later()))

    def newest_first(self, provider: str) -> list[Job]:
        """A listing: every job of `provider` but hidden creates not yet due to show in one."""
        count = self.lists[provider] = self.lists.get(provider, 0) + 1
        jobs = [j for j in self.jobs.values() if j.provider == provider and count >= j.listed_from]
        return sorted(jobs, key=lambda j: (j.created_at, j.id), reverse=True)


PROVIDERS: dict[str, Provider] = {}  # filled by the route modules


def world(fake: Fake) -> World:
    found = getattr(fake, "batch_world", None)
    if found is None:
        found = fake.batch_world = World()  # type: ignore[attr-defined]
    return found


def read(fake: Fake, job: Job) -> Job:
    """A status read: the job ends once it was read `batch_polls` times and is old enough."""
    job.reads += 1
    cfg = fake.config
    if job.state == "cancelling":
        job.state = "cancelled"
    elif (
        not job.ended
        and job.reads >= int(cfg["batch_polls"])
        and time.time() - job.created_at >= float(cfg["batch_seconds"])
    ):
        finish(fake, PROVIDERS[job.provider], job)
    elif not job.ended and cfg["batch_progress"]:  # rows finish as the job runs: its counts move
        run_rows(fake, PROVIDERS[job.provider], job, min(1.0, job.reads / max(1, int(cfg["batch_polls"]))))
    return job


async def answer_ahead(fake: Fake, job: Job, slice_rows: int = 100) -> None:
    """Answer a running job's rows while it runs, a slice at a time between other requests, as a
    real provider has its answers by the time a batch ends: its end (at a status read) then only
    marks it done, instead of computing every answer inside that read."""
    provider = PROVIDERS[job.provider]
    for start in range(0, len(job.rows), slice_rows):
        await asyncio.sleep(0)
        if job.state != "running":
            return
        answer_rows(fake, provider, job, job.rows[start : start + slice_rows])


def finish(fake: Fake, provider: Provider, job: Job) -> None:
    end = str(fake.config["batch_end"])
    if end == "failed":
        job.state, job.error_code = "failed", str(fake.config["batch_fail_code"])
        return
    share = 1.0 if end == "completed" else float(fake.config["batch_done_fraction"])
    run_rows(fake, provider, job, share)
    job.state = "completed" if end == "completed" else "expired"


def cancel(fake: Fake, job: Job) -> Job:
    """Rows in progress finish (the first `batch_done_fraction`), the rest are never run."""
    if not job.ended:
        run_rows(fake, PROVIDERS[job.provider], job, float(fake.config["batch_done_fraction"]))
        job.state = "cancelling"
    return job


def run_rows(fake: Fake, provider: Provider, job: Job, share: float) -> None:
    answer_rows(fake, provider, job, job.rows[: round(len(job.rows) * share)])


def answer_rows(fake: Fake, provider: Provider, job: Job, rows: list[Row]) -> None:
    """Answer the rows not answered yet."""
    lines = {id(row): n for n, row in enumerate(job.rows)}  # a row's line: which worker runs it (cache.py)
    for row in rows:
        if row.status is None:
            params = job.extra.get("route_params") or {"model": str(row.body.get("model", ""))}
            row.status, row.payload = answer_row(fake, provider, job.route, row.body, params, lines[id(row)])


def answer_row(
    fake: Fake, provider: Provider, route: Route, body: dict[str, Any], params: dict[str, str], line: int = 0
) -> tuple[int, dict[str, Any]]:
    """(status, body) of one row, decided like a realtime call (without latency or rate limits)."""
    try:
        call = route.parse(body, params)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return 400, provider.error_body(400, f"Invalid request: {exc}", None, 0.0)
    fake.record_media(call)
    call, refused = fake.caches.resolve(fake.stats, call)  # a Gemini line naming a context cache
    if refused is not None:
        return refused[0], provider.error_body(refused[0], refused[1], call, 0.0)
    action = fake._forced_action(call)
    if action == "quota" or (action is None and fake.config["quota_exhausted"]):
        return provider.quota_error(fake.config["quota_exhausted"] or True)
    action = action if action is not None else (fake.scripted_malformed(call) or fake._draw_fault())
    if action == "timeout":
        action = 500  # a batch row has no client to time out: the provider reports a server error
    if action is not None and action not in ("malformed", "blocked", "mistake", *UNASKED_ACTIONS):
        status = int(action.removeprefix("error_")) if isinstance(action, str) else int(action)
        fake.stats.faults[str(action)] += 1
        # A rate-limited row says when to retry (Gemini: RetryInfo); a spent quota is the "quota" fault.
        return status, provider.error_body(
            status, f"Request failed with status {status} (injected fault).", call, 1.0 if status == 429 else 0.0
        )
    answer = (None if action else fake.pair_judged(call)) or build_answer(
        call,
        malformed=action == "malformed",
        words=fake.config["text_words"],
        config=fake.config,
        mistake=action == "mistake",
    )  # reject_share: as realtime
    if action == "mistake":
        fake.stats.faults["mistake"] += 1
    if action == "blocked":
        fake.stats.faults["blocked"] += 1
        answer = blocked_answer(provider.name, answer)
    if action in UNASKED_ACTIONS:
        call, answer = unasked_answer(fake, str(action), call, answer)
    fake.bill(call, answer, batch_row=line)
    payload = route.render(call, answer, f"{next(fake.ids):012d}")
    return 200, refusal_body(provider.name, payload) if action == "blocked" else payload


def create_refusal(fake: Fake, provider: Provider) -> tuple[int, dict[str, Any]] | None:
    """The error a create gets instead of a job (quota exhausted, for every provider or for those in
    `batch_create_quota`, or `batch_create_status`)."""
    if fake.config["quota_exhausted"]:
        return provider.quota_error(fake.config["quota_exhausted"])
    if provider.name in (fake.config["batch_create_quota"] or []):
        return provider.quota_error(True)
    status = fake.config["batch_create_status"]
    if status:
        return int(status), provider.error_body(int(status), f"batch create refused ({status}, injected)", None, 0.0)
    return None


def broken(fake: Fake, lines: list[str]) -> list[str]:
    """A results file's lines, the first `batch_broken_lines` of them cut short (unparseable JSON):
    `batch_broken_keep` of each is kept (0.5: its key survives; 0.01: nothing tells whose it was)."""
    count, keep = int(fake.config.get("batch_broken_lines") or 0), float(fake.config.get("batch_broken_keep", 0.5))
    return [line[: int(len(line) * keep)] if index < count else line for index, line in enumerate(lines)]
