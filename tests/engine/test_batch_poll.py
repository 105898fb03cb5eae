"""The polling pace (engine/batch_poll.py) on its own: soon after a submit, then following each
batch's age, brought forward by an expected end (reported progress or history) but never to a
poll a second for a straggler, and backing off once an expected end has passed."""

from __future__ import annotations

from batchor.engine.batch_poll import PollPace, expected_end, typical_seconds

PACE = PollPace(poll_s=5.0, poll_max_s=60.0)


def test_a_new_batch_is_polled_half_a_second_after_its_submit_and_an_old_one_by_its_age():
    assert PACE.wait(100.0, 100.0) == 0.5
    assert PACE.wait(110.0, 100.0) == 2.5
    assert PACE.wait(10_000.0, 100.0) == 60.0  # batch_poll_max_s
    assert PollPace(poll_s=0.1, poll_max_s=60.0).wait(100.0, 100.0) == 0.1


def test_progress_brings_a_poll_forward_but_a_straggler_does_not_make_polls_constant():
    created, now = 1.8e9, 1.8e9 + 1000
    end = expected_end(now, created, done=90, total=100)  # 90 % after 1,000 s: about 111 s more
    assert end is not None and round(end - now) == 111
    assert abs(PollPace(5.0, 3600.0).wait(now, created, end) - 111.1) < 0.1  # sooner than 250 s (a quarter)
    straggler = expected_end(now, created, done=999, total=1000)
    assert PollPace(5.0, 3600.0).wait(now, created, straggler) == 1000 / 16


def test_an_expected_end_gets_a_poll_at_it_and_polls_back_off_once_it_is_passed():
    pace, start = PollPace(5.0, 3600.0), 1.8e9
    assert pace.wait(start, start, start + 2.0) == 0.5  # a young batch: the floor, not a poll at once
    assert pace.wait(start + 3000, start, start + 3600) == 600  # an hour-long batch: its end, not 750 s
    assert pace.wait(start + 3601, start, start + 3600) == 3601 / 16  # just past: the age's sixteenth
    assert pace.wait(start + 6000, start, start + 3600) == 600  # far past: a quarter of the delay (2,400 s)
    assert pace.wait(start + 9000, start, start + 1.0) == 8999 / 4  # a wrong history: back to about the age rule


def test_history_is_the_median_of_earlier_durations():
    assert typical_seconds([]) is None
    assert typical_seconds([2.0, 2.2, 86_400.0]) == 2.2  # one expired batch does not move it
    assert typical_seconds([0.0, 3.0]) == 3.0


def test_no_progress_reported_means_no_expected_end():
    assert expected_end(10.0, 1.0, done=None, total=100) is None
    assert expected_end(10.0, 1.0, done=0, total=100) is None
    assert expected_end(10.0, 1.0, done=100, total=100) is None  # finalizing: its age paces it
    assert expected_end(10.0, None, done=5, total=100) is None


def polls_until(pace: PollPace, duration: float) -> int:
    start = now = 1.8e9
    polls = 0
    while now - start < duration:
        now += pace.wait(now, start)
        polls += 1
    return polls


def test_polls_a_batch_of_a_minute_an_hour_and_a_day_takes_as_the_readme_says():
    pace = PollPace(poll_s=5.0, poll_max_s=60.0)  # the spec's defaults
    assert polls_until(pace, 2.0) == 4  # 0.5 s apart while young: at most two a second
    assert 15 <= polls_until(pace, 60) <= 25
    assert 70 <= polls_until(pace, 3600) <= 90
    assert 1400 <= polls_until(pace, 86_400) <= 1600
