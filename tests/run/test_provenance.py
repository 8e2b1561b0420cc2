"""What a record says about the machine: enough to tell apart two CPUs a virtual machine names alike."""

from __future__ import annotations

from cltoolkit.run.provenance import cpu_text

ZEN5 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
flags\t\t: fpu avx512f

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: another
"""


def test_cpu_text_names_the_family_and_model_of_the_first_processor() -> None:
    # two VMs both saying "AMD EPYC" ran OpenBLAS on different kernels (sessions-v1's least squares differ in the
    # last digit); the numbers tell them apart
    assert cpu_text(ZEN5, "x86_64") == "AMD EPYC (family 26, model 2)"
    assert cpu_text(ZEN5.replace("cpu family\t: 26", "cpu family\t: 25"), "x86_64") == "AMD EPYC (family 25, model 2)"


def test_cpu_text_without_numbers_is_the_model_name_or_the_fallback() -> None:
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n"
    assert cpu_text(arm, "aarch64") == "aarch64"
    assert cpu_text("model name\t: Some CPU\n", "x86_64") == "Some CPU"
    assert cpu_text("", "x86_64") == "x86_64"
