"""The mock provider's facts for planning (providers/facts.py): it answers offline (no endpoint,
key or bill; any model name) and embeds as OpenAI does."""

from __future__ import annotations

from batchor.providers.facts import GroupLimits, ProviderFacts

FACTS = ProviderFacts(embed_group=GroupLimits(2048, 300_000), offline=True)
