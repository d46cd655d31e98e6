"""bench/machine.py: the one-line CPU description every speed bench prints first."""

import importlib.util
import pathlib

import pytest

MACHINE = pathlib.Path(__file__).resolve().parents[1] / "bench" / "machine.py"

EPYC = """processor\t: 0
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse2 avx fma avx2
"""
XEON = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: avx avx2 fma avx512f avx512_vnni avx512_bf16 amx_tile
"""


@pytest.fixture(scope="module")
def machine():
    spec = importlib.util.spec_from_file_location("machine", MACHINE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_avx2_cpu_without_onednn_by_default(machine):
    line = machine.describe(EPYC, environ={})
    assert line.startswith("CPU: AMD EPYC 7B13, AVX2 (no AVX-512), ")
    assert "TensorFlow oneDNN off" in line


def test_avx512_cpu_with_onednn_by_default(machine):
    flags = machine.cpu_flags(XEON)
    assert machine.vector_units(flags) == "AVX-512 with VNNI"
    assert machine.onednn(flags, {}, "x86_64", "Linux") == (
        True, "the default on a CPU with avx512_vnni")


@pytest.mark.parametrize("value, on", [("0", False), ("1", True), ("true", True)])
def test_environment_variable_decides(machine, value, on):
    flags = machine.cpu_flags(XEON)
    assert machine.onednn(flags, {"TF_ENABLE_ONEDNN_OPTS": value}, "x86_64", "Linux") == (
        on, f"TF_ENABLE_ONEDNN_OPTS={value}")


def test_no_cpuinfo(machine):
    assert machine.vector_units(machine.cpu_flags("")) == "vector units unknown"
    assert machine.onednn(set(), {}, "arm64", "Darwin")[0] is False
    assert machine.onednn(set(), {}, "aarch64", "Linux")[0] is None
