"""Command line interface (parsing and printing only)."""
