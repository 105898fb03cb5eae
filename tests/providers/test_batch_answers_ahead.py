"""The fake's `batch_answers_ahead` (benchmarks/batch_small.py): a running job's rows are answered
while it runs, so the status read that ends it computes nothing; the answers are the ones a job
answered at its end gets, for each provider's Batch API through its SDK."""

from __future__ import annotations

import asyncio

import pytest

from tests.providers.batch_cases import collect, requests, run, tag

MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5", "gemini": "gemini-2.5-flash"}


@pytest.mark.parametrize("provider", sorted(MODELS))
def test_rows_answered_ahead_are_all_there_when_the_job_ends(fake, provider):
    def answers(ahead: bool) -> tuple[int | None, dict[str, str]]:
        fake.configure(batch_polls=2, batch_answers_ahead=ahead, seed=3)

        async def scenario(client):
            reqs = requests(MODELS[provider], 250)
            remote = await client.submit(tag(f"batchor-ahead-{ahead}", 250), [client.encode(r) for r in reqs])
            await asyncio.sleep(0.2)  # the fake answers in slices between requests
            running = await client.poll(remote.remote_id)
            assert not running.ended
            ended = await client.poll(remote.remote_id)
            assert ended.ended
            rows = await collect(client, ended)
            return running.done, {k: r.completion.text for k, r in rows.items() if r.completion is not None}

        return run(provider, scenario)

    done_ahead, ahead = answers(True)
    done_at_end, at_end = answers(False)
    assert len(ahead) == len(at_end) == 250 and ahead == at_end
    if provider != "gemini":  # OpenAI's and Anthropic's request counts show the rows already answered
        assert done_ahead == 250 and not done_at_end
