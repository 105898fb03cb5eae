"""batchor: run LLM prompts over every row of a dataset, declaratively."""

__version__ = "0.1.0"
