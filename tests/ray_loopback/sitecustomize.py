"""Keeps a test Ray cluster on the loopback address (on the PYTHONPATH of the test's `ray start` processes, their
workers and the driver only).

`ray start --node-ip-address=127.0.0.1` and `--address=127.0.0.1:<port>` turn 127.0.0.1 into the machine's own
network address (`ray._private.services.resolve_ip_for_localhost`); tests talk to loopback only, so this keeps the
address as given. Nothing else of Ray is changed."""

import os

if os.environ.get("CLT_TEST_RAY_LOOPBACK") == "1":
    import ray._private.services as _services

    _services.resolve_ip_for_localhost = lambda host: host
