"""The wmf suite."""
