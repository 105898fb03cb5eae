"""A shared run's budget and rate buckets on PostgreSQL state (state/leases.py's `LeaseBook` has
these through `SharedLimits`): workers draw dollars of the run's --max-cost and requests and tokens
of its providers' rate limits from rows every worker locks, so many processes keep one budget and
one rate. Each method is one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchor.state.postgres_store import PostgresStore


@dataclass
class Grant:
    """What the shared rate bucket gave: requests and tokens to spend, or how long to wait."""

    requests: int
    tokens: float
    wait_s: float


class SharedLimits:
    """The budget and rate-bucket transitions of one worker (`worker_id`) on `store`."""

    store: PostgresStore
    worker_id: str

    # --- shared budget -----------------------------------------------------------------------

    def set_budget(self, run_id: str, limit_usd: float | None) -> float | None:
        """The run's --max-cost: the tightest any worker gave. Returns it (None: the run has none).

        A budget set after workers started counts what they had spent by their last heartbeat.
        """
        with self.store.pg() as conn, conn.transaction():
            if limit_usd is not None:
                conn.execute(
                    "INSERT INTO run_budgets (run_id, limit_usd, committed_usd) VALUES (%s, %s, "
                    "(SELECT coalesce(sum(cost_usd), 0) FROM workers WHERE run_id = %s)) "
                    "ON CONFLICT (run_id) DO UPDATE SET limit_usd = least(run_budgets.limit_usd, EXCLUDED.limit_usd)",
                    [run_id, limit_usd, run_id],
                )
            row = conn.execute("SELECT limit_usd FROM run_budgets WHERE run_id = %s", [run_id]).fetchone()
        return None if row is None else float(row[0])

    def draw_budget(self, run_id: str, want: float, need: float) -> float:
        """Take up to `want` dollars of the run's budget (0 when less than `need` is left)."""
        with self.store.pg() as conn, conn.transaction():
            row = conn.execute(
                "SELECT limit_usd - committed_usd FROM run_budgets WHERE run_id = %s FOR UPDATE", [run_id]
            ).fetchone()
            left = float(row[0]) if row is not None else 0.0
            grant = min(want, left) if left + 1e-12 >= need else 0.0
            if grant > 0:
                conn.execute(
                    "UPDATE run_budgets SET committed_usd = committed_usd + %s WHERE run_id = %s", [grant, run_id]
                )
                conn.execute(
                    "UPDATE workers SET budget_drawn = budget_drawn + %s WHERE worker_id = %s", [grant, self.worker_id]
                )
        return grant

    def return_budget(self, run_id: str, amount: float) -> None:
        """Give back the part of this worker's draws it did not spend."""
        if amount <= 0:
            return
        with self.store.pg() as conn, conn.transaction():
            conn.execute(
                "UPDATE run_budgets SET committed_usd = greatest(0, committed_usd - %s) WHERE run_id = %s",
                [amount, run_id],
            )
            conn.execute(
                "UPDATE workers SET budget_drawn = greatest(0, budget_drawn - %s) WHERE worker_id = %s",
                [amount, self.worker_id],
            )

    # --- shared rate limits ------------------------------------------------------------------

    def take(
        self,
        rate_key: str,
        rpm: float | None,
        tpm: float | None,
        burst_s: float,
        want: int,
        want_tokens: float,
        need_tokens: float,
        pause_s: float = 0.0,
    ) -> Grant:
        """Take up to `want` requests (and tokens, at least `need_tokens`) from the shared bucket.

        One statement (`_DRAW`), so one round trip: refill, pause and grant are computed on the
        bucket row it locks. The first draw of a bucket finds no row: it adds a full one and draws again."""
        args = {
            "key": rate_key,
            "rpm": rpm,
            "tpm": tpm,
            "burst": float(burst_s),
            "rate_r": (rpm or 0) / 60,
            "rate_t": (tpm or 0) / 60,
            "want": float(want),
            "want_t": float(want_tokens),
            "need": float(need_tokens),
            "pause": float(pause_s),
        }
        with self.store.pg() as conn:
            row = conn.execute(_DRAW, args).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO rate_buckets (rate_key, rpm, tpm, burst_s, requests, tokens, updated_at) "
                    "VALUES (%(key)s, %(rpm)s, %(tpm)s, %(burst)s, %(rate_r)s * %(burst)s, "
                    "%(rate_t)s * %(burst)s, clock_timestamp()) ON CONFLICT DO NOTHING",
                    args,
                )
                row = conn.execute(_DRAW, args).fetchone()
        return Grant(int(row[0]), float(row[1]), float(row[2]))


# The shared bucket's draw, in one statement on the row it locks. Both buckets refill for the
# time since the last draw (up to `burst` seconds of rate); a pause (a 429 that showed the limit
# spent) holds every draw until it passes; otherwise a draw waits until one request (and
# `need` tokens, at most a full bucket) are there, then takes what it wants of what is there.
_DRAW = """
WITH b AS (
    SELECT rate_key, requests, tokens, paused_until,
           greatest(extract(epoch FROM clock_timestamp() - updated_at)::float8, 0) AS elapsed
    FROM rate_buckets WHERE rate_key = %(key)s FOR UPDATE),
level AS (
    SELECT rate_key, paused_until,
           CASE WHEN %(rate_r)s > 0 THEN least(%(rate_r)s * %(burst)s, requests + elapsed * %(rate_r)s)
                ELSE requests END AS r,
           CASE WHEN %(rate_t)s > 0 THEN least(%(rate_t)s * %(burst)s, tokens + elapsed * %(rate_t)s)
                ELSE tokens END AS t,
           greatest(coalesce(extract(epoch FROM paused_until - clock_timestamp())::float8, 0), %(pause)s) AS paused,
           CASE WHEN %(rate_t)s > 0 THEN least(%(need)s, %(rate_t)s * %(burst)s) ELSE %(need)s END AS need
    FROM b),
waits AS (
    SELECT *, CASE WHEN paused > 0 THEN paused ELSE greatest(
                  CASE WHEN %(rate_r)s > 0 AND %(want)s > 0 AND r < 1 THEN (1 - r) / %(rate_r)s ELSE 0 END,
                  CASE WHEN %(rate_t)s > 0 AND t < need THEN (need - t) / %(rate_t)s ELSE 0 END) END AS wait
    FROM level),
g AS (
    SELECT *, CASE WHEN wait > 0 THEN 0 WHEN %(rate_r)s > 0 THEN least(%(want)s, floor(r)) ELSE %(want)s END AS got_r,
              CASE WHEN wait > 0 THEN 0 WHEN %(rate_t)s > 0 THEN least(greatest(%(want_t)s, need), t)
                   ELSE %(want_t)s END AS got_t
    FROM waits)
UPDATE rate_buckets o SET
    requests = g.r - CASE WHEN %(rate_r)s > 0 THEN g.got_r ELSE 0 END,
    tokens = g.t - CASE WHEN %(rate_t)s > 0 THEN g.got_t ELSE 0 END,
    rpm = %(rpm)s, tpm = %(tpm)s, burst_s = %(burst)s, updated_at = clock_timestamp(),
    paused_until = CASE WHEN %(pause)s > 0 THEN greatest(coalesce(g.paused_until, clock_timestamp()),
                                                         clock_timestamp() + make_interval(secs => %(pause)s))
                        ELSE g.paused_until END
FROM g WHERE o.rate_key = g.rate_key
RETURNING g.got_r, g.got_t, g.wait"""
