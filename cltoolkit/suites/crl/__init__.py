"""Continual reinforcement learning: a declarative task stream (issue #55; docs/cw10.md)."""
