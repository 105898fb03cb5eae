"""The limiter under 429s: random ones delay only their request, a spent limit slows the pool
once per pace, and until the limits are known one request goes alone. Time is a fake clock
advanced by the limiter's own sleeps, so the pace is counted, not timed."""

from __future__ import annotations

import asyncio

import pytest

from batchor.engine.limiter import ADOPTED_SHARE, CUT, DEFAULT_WAIT_S, RateLimiter
from batchor.errors import RateLimitedError


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)


def limiter(rpm: float | None = 600, tpm: float | None = None) -> tuple[RateLimiter, FakeTime]:
    time = FakeTime()
    return RateLimiter(rpm, tpm, clock=time.clock, sleep=time.sleep), time


def random_429(retry_after: float | None = 1.0) -> RateLimitedError:
    return RateLimitedError("overloaded", status=429, retry_after=retry_after)


def spent_429(retry_after: float | None = 2.0) -> RateLimitedError:
    return RateLimitedError(
        "Rate limit reached",
        status=429,
        retry_after=retry_after,
        rate_limits={"limit-requests": 600, "remaining-requests": 0},
    )


def sent_in(lim: RateLimiter, time: FakeTime, seconds: float) -> int:
    """How many requests the limiter lets through in `seconds` of its clock."""
    until, count = time.now + seconds, 0

    async def drain() -> None:
        nonlocal count
        while time.now < until:
            await lim.acquire()
            count += 1

    asyncio.run(drain())
    return count


def test_random_429s_delay_only_their_request_and_leave_the_pace_alone():
    lim, time = limiter(rpm=600)
    sent_in(lim, time, 1.0)  # spend the initial burst
    waits = []
    for n in range(200):  # 10 % random 429s among successes
        if n % 10 == 0:
            waits.append(lim.on_rate_limited(random_429(1.0), sent_at=time.now))
        else:
            lim.on_success({})
    assert waits == [1.0] * 20
    assert lim.factor == 1.0 and lim.paused_until == 0.0
    assert sent_in(lim, time, 10.0) == pytest.approx(100, abs=2)  # still 600 rpm


def test_a_429_without_retry_after_waits_the_default():
    lim, time = limiter()
    assert lim.on_rate_limited(random_429(None), sent_at=time.now) == DEFAULT_WAIT_S
    assert lim.paused_until == 0.0


def test_a_spent_limit_pauses_the_pool_and_cuts_the_pace_once_per_pace():
    lim, time = limiter(rpm=600)
    sent_before = time.now
    time.now += 0.5
    assert lim.on_rate_limited(spent_429(2.0), sent_at=sent_before) == 0.0  # acquire waits for the pause
    assert lim.paused_until == time.now + 2.0
    assert lim.factor == CUT
    for _ in range(30):  # the other requests sent before the cut come back 429 too: no further cut
        lim.on_rate_limited(spent_429(2.0), sent_at=sent_before)
    assert lim.factor == CUT
    time.now += 3.0
    lim.on_rate_limited(spent_429(2.0), sent_at=time.now)  # sent at the cut pace: cut again
    assert lim.factor == pytest.approx(CUT * CUT)


def test_successes_bring_the_pace_back():
    lim, time = limiter(rpm=600)
    lim.on_rate_limited(spent_429(), sent_at=time.now)
    for _ in range(10):
        lim.on_success({})
    assert lim.factor == 1.0


def test_mostly_429s_without_limit_headers_pause_the_pool():
    """No headers say the limit is spent (Gemini sends none), but nearly every answer is a 429."""
    lim, time = limiter(rpm=None)
    lim.on_success({})
    waits = [lim.on_rate_limited(random_429(3.0), sent_at=time.now) for _ in range(20)]
    assert waits[0] == 3.0  # a few 429s: only their requests wait
    assert waits[-1] == 0.0  # half of the recent answers: the pool waits
    assert lim.paused_until == time.now + 3.0


def test_gateway_limits_on_a_429_are_adopted():
    lim, time = limiter(rpm=None)
    lim.on_rate_limited(spent_429(), sent_at=time.now)
    assert lim.requests is not None and lim.requests.rate == pytest.approx(600 * ADOPTED_SHARE / 60)


def test_the_first_request_goes_alone_until_the_limits_are_known():
    lim, time = limiter(rpm=None)
    released: list[int] = []

    async def request(n: int) -> None:
        await lim.acquire()
        released.append(n)

    async def main() -> None:
        tasks = [asyncio.create_task(request(n)) for n in range(5)]
        for _ in range(5):
            await asyncio.sleep(0)
        assert released == [0]  # the probe
        lim.on_success({"limit-requests": 60, "remaining-requests": 59})
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert sorted(released) == [0, 1, 2, 3, 4]
    assert lim.requests is not None and lim.requests.rate == pytest.approx(60 * ADOPTED_SHARE / 60)


def test_a_failed_probe_releases_the_others():
    lim, _ = limiter(rpm=None)

    async def main() -> int:
        await lim.acquire()
        waiting = asyncio.create_task(lim.acquire())
        await asyncio.sleep(0)
        assert not waiting.done()
        lim.on_failure()
        await waiting
        return 2

    assert asyncio.run(main()) == 2


def test_spec_limits_need_no_probe():
    lim, time = limiter(rpm=6000)
    assert sent_in(lim, time, 0.0001) >= 1

    async def two() -> None:
        await lim.acquire()
        await lim.acquire()

    asyncio.run(two())
