"""The ladder suite."""
