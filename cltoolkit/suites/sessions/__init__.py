"""The sessions suite."""
