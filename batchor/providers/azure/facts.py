"""Azure OpenAI's facts for planning (providers/facts.py): a model block names a deployment, which
serves the OpenAI model `options.model` names (providers/clouds.py `priced_as`); everything else
is the empty description's, so its requests are held to OpenAI's attachment rules."""

from __future__ import annotations

from batchor.providers.facts import ProviderFacts

FACTS = ProviderFacts(deployments=True)
