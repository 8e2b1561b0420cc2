"""The gatekeeper: refusal rules, gate decisions, and the only writer of a protocol's `results` and `status`."""
