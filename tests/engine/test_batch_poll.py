"""The polling pace (engine/batch_poll.py) on its own: soon after a submit, then following each
batch's age, brought forward by reported progress but never to a poll a second for a straggler."""

from __future__ import annotations

from batchor.engine.batch_poll import PollPace, expected_end

PACE = PollPace(poll_s=5.0, poll_max_s=60.0)


def test_a_new_batch_is_polled_half_a_second_after_its_submit_and_an_old_one_by_its_age():
    assert PACE.wait(100.0, [(100.0, None)]) == 0.5
    assert PACE.wait(110.0, [(100.0, None)]) == 2.5
    assert PACE.wait(10_000.0, [(100.0, None)]) == 60.0  # batch_poll_max_s
    assert PACE.wait(110.0, [(100.0, None), (109.0, None)]) == 0.5  # the soonest batch decides
    assert PollPace(poll_s=0.1, poll_max_s=60.0).wait(100.0, [(100.0, None)]) == 0.1


def test_progress_brings_a_poll_forward_but_a_straggler_does_not_make_polls_constant():
    created, now = 1.8e9, 1.8e9 + 1000
    end = expected_end(now, created, done=90, total=100)  # 90 % after 1,000 s: about 111 s more
    assert end is not None and round(end - now) == 111
    assert abs(PollPace(5.0, 3600.0).wait(now, [(created, end)]) - 111.1) < 0.1  # sooner than 250 s (a quarter)
    straggler = expected_end(now, created, done=999, total=1000)
    assert PollPace(5.0, 3600.0).wait(now, [(created, straggler)]) == 1000 / 16


def test_no_progress_reported_means_no_expected_end():
    assert expected_end(10.0, 1.0, done=None, total=100) is None
    assert expected_end(10.0, 1.0, done=0, total=100) is None
    assert expected_end(10.0, 1.0, done=100, total=100) is None  # finalizing: its age paces it
    assert expected_end(10.0, None, done=5, total=100) is None
