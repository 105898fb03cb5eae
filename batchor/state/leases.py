"""Shared-run transitions on PostgreSQL state: workers, claims with leases, shared rate buckets.

A *worker* is one `apply` process. It joins the job's live run (or starts one), then claims
slices of the run's *work items* (`SELECT ... FOR UPDATE SKIP LOCKED`, in plan order). A claim
names its worker and lasts while the worker's lease does: the worker's heartbeat renews one row,
which renews all its claims; when a worker dies its lease passes and its open items can be
claimed by others. Storing an answer closes its item (in `PostgresStore.record_results`).
Lease times are the database's clock, never a worker's. Each method is one transaction.
"""

from __future__ import annotations

from typing import Any, Iterable

from batchor.state.base import RunRecord, RunStatus
from batchor.state.pg_sql import insert_run, update_run
from batchor.state.postgres_store import PostgresStore
from batchor.state.runs import ANSWERED_SQL, DIED_REASON
from batchor.state.shared_limits import SharedLimits


def _live(alias: str = "") -> str:
    """A worker that runs and whose lease has not passed (by the database's clock)."""
    prefix = f"{alias}." if alias else ""
    return f"{prefix}status = 'running' AND {prefix}lease_until >= now()"


# An item is claimable when nobody holds it, or its holder stopped or lost its lease. A correlated
# subquery, not a join: when a concurrent claim wins the row lock, PostgreSQL re-checks this
# condition on the row's new version, and only a subquery is evaluated again for the new holder.
_CLAIMABLE = (
    f"(w.worker_id IS NULL OR NOT EXISTS (SELECT 1 FROM workers o WHERE o.worker_id = w.worker_id AND {_live('o')}))"
)
_ENQUEUE_CHUNK = 50_000  # keys per statement
_COUNTERS = ("requests", "succeeded", "failed", "cached", "skipped", "input_tokens", "output_tokens", "cost_usd")


class LeaseBook(SharedLimits):
    """One worker's transitions on a shared run: membership, claims, and (SharedLimits) the run's
    budget and rate buckets."""

    def __init__(self, store: PostgresStore, worker_id: str, lease_s: float) -> None:
        self.store, self.worker_id, self.lease_s = store, worker_id, float(lease_s)

    # --- membership --------------------------------------------------------------------------

    def join_run(self, run: RunRecord, host: str, pid: int) -> RunRecord:
        """Join the job's run that has live workers, or start `run`; register this worker in it."""
        with self.store.pg() as conn, conn.transaction():
            _lock(conn, "job", run.job_id)
            _close_abandoned(conn, run.job_id)
            row = conn.execute(
                "SELECT run_id FROM runs r WHERE job_id = %s AND finished_at IS NULL AND EXISTS "
                f"(SELECT 1 FROM workers o WHERE o.run_id = r.run_id AND {_live('o')}) "
                "ORDER BY started_at DESC LIMIT 1",
                [run.job_id],
            ).fetchone()
            if row is not None:
                run.run_id = row[0]
            else:
                insert_run(conn, run)
            conn.execute(
                "INSERT INTO workers (worker_id, run_id, job_id, host, pid, status, lease_until) "
                "VALUES (%s, %s, %s, %s, %s, 'running', now() + make_interval(secs => %s))",
                [self.worker_id, run.run_id, run.job_id, host, pid, self.lease_s],
            )
        return run

    def heartbeat(self, run_id: str, counters: dict[str, float]) -> None:
        """Renew this worker's lease (and so all its claims); publish its counters and the run's sums."""
        with self.store.pg() as conn, conn.transaction():
            _save_worker(conn, self.worker_id, counters, self.lease_s)
            _sum_run(conn, run_id)

    def leave(self, run: RunRecord, status: str, counters: dict[str, float]) -> bool:
        """Release open claims and stop. The last live worker closes the run with exact totals
        (counted from the stored results) and returns True; `run` is updated in place then."""
        with self.store.pg() as conn, conn.transaction():
            _lock(conn, "job", run.job_id)
            conn.execute("UPDATE work_items SET worker_id = NULL WHERE worker_id = %s AND NOT done", [self.worker_id])
            _save_worker(conn, self.worker_id, counters, 0.0, status=status)
            others = conn.execute(
                f"SELECT count(*) FROM workers WHERE run_id = %s AND worker_id <> %s AND {_live()}",
                [run.run_id, self.worker_id],
            ).fetchone()[0]
            if others:
                _sum_run(conn, run.run_id)
                return False
            conn.execute("UPDATE workers SET status = 'lost' WHERE run_id = %s AND status = 'running'", [run.run_id])
            _exact_totals(conn, run)
            run.status = _settled_status(run)
            update_run(conn, run, final=True)
            _settle_workers(conn, run.run_id)  # the items go: keep what each worker committed
            conn.execute("DELETE FROM work_items WHERE run_id = %s", [run.run_id])
        return True

    def list_workers(self, run_id: str) -> list[dict[str, Any]]:
        """The run's workers with what each committed: its done work items' stored results (not
        its heartbeat's counters, which a worker killed between heartbeats never sent); once the
        run is closed and its items are gone, the same figures as kept then (`_settle_workers`)."""
        with self.store.pg() as conn:
            live = conn.execute("SELECT 1 FROM work_items WHERE run_id = %s LIMIT 1", [run_id]).fetchone()
            counts = (
                "coalesce(d.ok, 0), coalesce(d.failed, 0), coalesce(d.cost, 0)::float8, "
                "coalesce(d.ok + d.failed, 0), greatest(o.heartbeat_at, d.last_at)"
                if live
                # a lost worker's last commit is not kept: its rate is not known
                else "o.succeeded, o.failed, o.cost_usd, o.succeeded + o.failed, "
                "CASE WHEN o.status IN ('lost', 'running') THEN NULL ELSE o.heartbeat_at END"
            )
            cur = conn.execute(
                f"WITH d AS ({_COMMITTED}) SELECT o.worker_id, o.host, o.pid, CASE WHEN o.status = 'running' "
                "AND o.lease_until < now() THEN 'lost' ELSE o.status END, o.started_at, o.heartbeat_at, "
                "round(extract(epoch FROM now() - o.heartbeat_at)::numeric, 1)::float8, "
                f"(SELECT count(*) FROM work_items w WHERE w.worker_id = o.worker_id AND NOT w.done), {counts} "
                "FROM workers o LEFT JOIN d USING (worker_id) WHERE o.run_id = %s ORDER BY o.started_at",
                [run_id, run_id],
            )
            names = (
                "worker_id",
                "host",
                "pid",
                "status",
                "started_at",
                "heartbeat_at",
                "heartbeat_age_s",
                "leases",
                "succeeded",
                "failed",
                "cost_usd",
            )
            return [{**dict(zip(names, row)), "per_s": _rate(row[-2], row[4], row[-1])} for row in cur.fetchall()]

    def live_counts(self, run_id: str) -> dict[str, Any]:
        """The run's answers so far, counted from the stored results: the run row only sums the
        workers' heartbeats, a third of a lease apart, so it reads 0 for the first seconds."""
        with self.store.pg() as conn:
            row = conn.execute(
                f"SELECT count(*) FILTER (WHERE {ANSWERED_SQL}), count(*) FILTER (WHERE status = 'failed'), "
                "coalesce(sum(cost_usd), 0)::float8, coalesce(sum(input_tokens), 0)::bigint, "
                "coalesce(sum(output_tokens), 0)::bigint FROM results WHERE run_id = %s",
                [run_id],
            ).fetchone()
        return dict(zip(("succeeded", "failed", "cost_usd", "input_tokens", "output_tokens"), row))

    # --- work items --------------------------------------------------------------------------

    def enqueue(self, run_id: str, step: str, keys: Iterable[str], *, widens: bool = False) -> bool:
        """Add a step's pending keys to the run's work items (in plan order; existing ones stay).
        True when this worker added them, False when the step's items were there already.

        The first worker of a run adds the items; the others find them and send nothing (before,
        every worker sent every key, which cost the database an index probe per key and worker).
        A later worker's pending keys are among the first one's: answers only accumulate during a
        run. Only a worker whose options widen its share (`widens`: --refresh, --retry-failed)
        adds its keys anyway; keys already there stay as they are (done or claimed)."""
        with self.store.pg() as conn, conn.transaction():
            _lock(conn, "items", f"{run_id}:{step}")  # the first adder commits before others look
            if (
                not widens
                and conn.execute(
                    "SELECT 1 FROM work_items WHERE run_id = %s AND step = %s LIMIT 1", [run_id, step]
                ).fetchone()
                is not None
            ):
                return False
            listed = list(keys)
            for start in range(0, len(listed), _ENQUEUE_CHUNK):
                conn.execute(
                    "INSERT INTO work_items (run_id, step, request_key, position) "
                    "SELECT %s, %s, k, %s + p - 1 FROM unnest(%s::text[]) WITH ORDINALITY AS n(k, p) "
                    "ON CONFLICT DO NOTHING",
                    [run_id, step, start, listed[start : start + _ENQUEUE_CHUNK]],
                )
        return True

    def claim(self, run_id: str, step: str, limit: int) -> list[tuple[str, int]]:
        """Claim up to `limit` open items, lowest positions first; returns (key, position) pairs.

        The locked rows reach the UPDATE by their tuple ids (a direct fetch each): joined to it by
        key instead, a freshly filled table without statistics made the planner scan every item per
        picked key (0.2 s per claim at 4,000 items). A row locked FOR UPDATE keeps its tuple id.
        One statement, so no explicit transaction: BEGIN and COMMIT were two of its round trips."""
        with self.store.pg() as conn:
            rows = conn.execute(
                "UPDATE work_items q SET worker_id = %s, claimed_at = now() "
                "WHERE q.ctid = ANY(ARRAY(SELECT w.ctid FROM work_items w "
                f"WHERE w.run_id = %s AND w.step = %s AND NOT w.done AND {_CLAIMABLE} "
                "ORDER BY w.position LIMIT %s FOR UPDATE SKIP LOCKED)) "
                "RETURNING q.request_key, q.position",
                [self.worker_id, run_id, step, limit],
            ).fetchall()
        return sorted(((k, int(p)) for k, p in rows), key=lambda kp: kp[1])

    def open_items(self, run_id: str, steps: list[str]) -> tuple[int, int]:
        """(claimable now, held by other live workers) among the open items of these steps."""
        with self.store.pg() as conn:
            row = conn.execute(
                f"SELECT count(*) FILTER (WHERE {_CLAIMABLE}), "
                f"count(*) FILTER (WHERE NOT {_CLAIMABLE} AND w.worker_id <> %s) "
                "FROM work_items w WHERE w.run_id = %s AND w.step = ANY(%s::text[]) AND NOT w.done",
                [self.worker_id, run_id, steps],
            ).fetchone()
        return int(row[0]), int(row[1])

    def release(self) -> int:
        """Give back this worker's open claims (a graceful stop), so others take them at once."""
        with self.store.pg() as conn:
            cur = conn.execute(
                "UPDATE work_items SET worker_id = NULL WHERE worker_id = %s AND NOT done", [self.worker_id]
            )
            return int(cur.rowcount)


def _settled_status(run: RunRecord) -> RunStatus:
    """A run that ran to its end is judged on all workers' answers, not the last worker's."""
    if run.status not in ("succeeded", "partial", "failed"):
        return run.status  # interrupted, paused, budget: how the last worker stopped
    if run.failed:
        return "partial" if run.succeeded or run.cached else "failed"
    return "succeeded"


def _lock(conn: Any, kind: str, key: str) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"batchor:{kind}:{key}"])


def _close_abandoned(conn: Any, job_id: str) -> None:
    """Shared runs of this job whose workers all died are over: mark them died (state/runs.py)."""
    conn.execute(
        "UPDATE runs r SET status = 'died', paused_reason = coalesce(paused_reason, %s), "
        "finished_at = LOCALTIMESTAMP WHERE job_id = %s "
        "AND finished_at IS NULL AND EXISTS (SELECT 1 FROM workers o WHERE o.run_id = r.run_id) "
        f"AND NOT EXISTS (SELECT 1 FROM workers o WHERE o.run_id = r.run_id AND {_live('o')})",
        [DIED_REASON, job_id],
    )


def _save_worker(
    conn: Any, worker_id: str, counters: dict[str, float], lease_s: float, status: str | None = None
) -> None:
    sets = ", ".join(f"{c} = %s" for c in _COUNTERS)
    args = [counters.get(c, 0) for c in _COUNTERS]
    state = ", status = %s" if status else ""
    conn.execute(
        f"UPDATE workers SET {sets}{state}, heartbeat_at = now(), "
        "lease_until = now() + make_interval(secs => %s) WHERE worker_id = %s",
        args + ([status] if status else []) + [lease_s, worker_id],
    )


# Per worker of a run: what it committed, from its done work items' stored results (a done item
# keeps the worker that closed it; `status` and `attempts` are the result's, items have neither).
_COMMITTED = (
    f"SELECT w.worker_id, count(*) FILTER (WHERE {ANSWERED_SQL}) AS ok, "
    "count(*) FILTER (WHERE r.status = 'failed') AS failed, sum(r.cost_usd) AS cost, "
    "max(r.finished_at) AS last_at FROM work_items w JOIN results r "
    "ON r.request_key = w.request_key AND r.run_id = w.run_id WHERE w.run_id = %s AND w.done "
    "GROUP BY w.worker_id"
)


def _settle_workers(conn: Any, run_id: str) -> None:
    """Before a closed run's work items go: each worker's row keeps what it committed."""
    conn.execute(
        f"WITH d AS ({_COMMITTED}) UPDATE workers o SET succeeded = coalesce(d.ok, 0), "
        "failed = coalesce(d.failed, 0), cost_usd = coalesce(d.cost, 0) "
        "FROM workers x LEFT JOIN d USING (worker_id) WHERE x.run_id = %s AND o.worker_id = x.worker_id",
        [run_id, run_id],
    )


def _rate(done: Any, started: Any, last: Any) -> float | None:
    """Answers per second between a worker's start and its last commit or heartbeat (None: unknown)."""
    if started is None or last is None:
        return None
    return round(float(done or 0) / max(float((last - started).total_seconds()), 1e-3), 2)


def _sum_run(conn: Any, run_id: str) -> None:
    """While workers run, the run shows the sum of their counters (scan figures from the widest scan)."""
    conn.execute(
        "UPDATE runs r SET succeeded = s.succeeded, failed = s.failed, cost_usd = s.cost_usd, "
        "input_tokens = s.input_tokens, output_tokens = s.output_tokens, requests = f.requests, "
        "cached = f.cached, skipped = f.skipped "
        "FROM (SELECT sum(succeeded) AS succeeded, sum(failed) AS failed, sum(cost_usd) AS cost_usd, "
        "sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens FROM workers WHERE run_id = %s) s, "
        "(SELECT requests, cached, skipped FROM workers WHERE run_id = %s ORDER BY requests DESC LIMIT 1) f "
        "WHERE r.run_id = %s",
        [run_id, run_id, run_id],
    )


def _exact_totals(conn: Any, run: RunRecord) -> None:
    """The run's answers as stored (a request answered twice counts once)."""
    row = conn.execute(
        f"SELECT count(*) FILTER (WHERE {ANSWERED_SQL}), count(*) FILTER (WHERE status = 'failed'), "
        "coalesce(sum(cost_usd), 0), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0) "
        "FROM results WHERE run_id = %s",
        [run.run_id],
    ).fetchone()
    run.succeeded, run.failed, run.cost_usd, run.input_tokens, run.output_tokens = (
        int(row[0]),
        int(row[1]),
        float(row[2]),
        int(row[3]),
        int(row[4]),
    )
    scan = conn.execute(
        "SELECT requests, cached, skipped FROM workers WHERE run_id = %s ORDER BY requests DESC LIMIT 1", [run.run_id]
    ).fetchone()
    if scan is not None:
        run.requests, run.cached, run.skipped = (int(v or 0) for v in scan)
