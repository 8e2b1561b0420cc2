"""`clt run --device`: the request is checked before anything runs, resolved in the worker (auto: the first CUDA
device, else the CPU; cuda without a device: one-line failure, never a silent CPU run), and recorded; a gpu-marked
test trains a short wmf cell on CUDA and compares it with the CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from cltoolkit.registry import registries  # noqa: E402
from cltoolkit.suites.devices import resolve_device  # noqa: E402


def test_device_requests_resolve_or_fail_in_one_line() -> None:
    assert resolve_device("cpu") == "cpu"
    cuda = torch.cuda.is_available()
    assert resolve_device("auto") == ("cuda:0" if cuda else "cpu")
    with pytest.raises(ValueError, match="expected auto, cpu, cuda or cuda:N"):
        resolve_device("gpu0")
    with pytest.raises(RuntimeError, match=r"device 'cuda:99' requested but torch sees"):
        resolve_device("cuda:99")


def test_a_bad_device_is_refused_before_any_run(cli, project) -> None:
    out = cli("run", "-p", "wmf-lite-v1", "--pilot", "--device", "tpu")
    assert out.exit_code != 0
    assert "--device 'tpu': expected auto, cpu, cuda or cuda:N" in out.output
    assert "Traceback" not in out.output
    assert not (project.root / "pilot-runs").exists()
    if not torch.cuda.is_available():  # no run is started (and no failed record written) for a missing GPU
        out = cli("run", "-p", "wmf-lite-v1", "--pilot", "--device", "cuda")
        assert out.exit_code != 0
        assert "torch sees no CUDA device" in out.output
        assert "use --device cpu" in out.output
        assert not (project.root / "pilot-runs").exists()
    out = cli("run", "-p", "ladder-v1", "--pilot", "--device", "cuda:0")  # a suite without torch models
    assert out.exit_code == 1
    assert "suite 'ladder' has no torch models" in out.output
    assert not (project.root / "pilot-runs").exists()


def _tiny(tmp: Path):
    from cltoolkit.suites.wmf.models import WmfProtocol
    from tests.suites.test_wmf import _tiny_doc

    return WmfProtocol.model_validate_json(json.dumps(_tiny_doc()), strict=True)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_short_wmf_cell_on_cuda_is_finite_and_close_to_the_cpu(tmp_path: Path) -> None:
    """Same protocol, seed and data; models, batches and losses on CUDA. Float32 kernels differ between devices,
    so the metrics agree closely, not bit for bit."""
    from cltoolkit.suites.wmf.driver import run_cell
    from cltoolkit.suites.wmf.suite import make_method

    protocol = _tiny(tmp_path)
    cpu = run_cell(
        protocol, "minigrid-min", make_method("wmf.finetuning", {}, registries()), 0, tmp_path / "cpu", "cpu"
    )
    gpu = run_cell(
        protocol, "minigrid-min", make_method("wmf.finetuning", {}, registries()), 0, tmp_path / "gpu", "cuda"
    )
    for key in ("pf", "rd", "reconAAfterA", "reconBAfterB", "nllAAfterA"):
        a, b = cpu["metrics"][key], gpu["metrics"][key]
        assert math.isfinite(b)
        assert b == pytest.approx(a, rel=0.05, abs=0.05), key
