"""The batchor version, in one place: pyproject reads it, plans record it."""

__version__ = "0.1.0"
