"""The CPU a bench runs on, in one line: speed verdicts flip between machines (issue 48).

Every speed bench prints `describe()` first, and the docs quote it beside each figure:
the model name, whether the CPU has AVX2 and AVX-512, the cores this process may use,
and whether TensorFlow uses its oneDNN kernels. TensorFlow has no public call for the
last (`tf.sysconfig.get_build_info()` does not say), so it is read as TensorFlow decides
it: `TF_ENABLE_ONEDNN_OPTS` when set, else on for Linux x86 CPUs with one of the
neural-network features below (AVX-512 VNNI / BF16, AVX-VNNI, AMX), off otherwise. It
logs "oneDNN custom operations are on" when on.
"""

import os
import platform

# The CPU features that turn TensorFlow's oneDNN kernels on by default on Linux x86.
ONEDNN_DEFAULT_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8",
                        "amx_bf16")


def read_cpuinfo(path="/proc/cpuinfo"):
    """The text of /proc/cpuinfo, or "" where there is none (not Linux)."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError:
        return ""


def first_field(cpuinfo, name):
    """The value of the first `name : value` line of `cpuinfo`, or None."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


def cpu_name(cpuinfo=None):
    """The CPU's model name, e.g. "AMD EPYC 7B13" or "Intel(R) Xeon(R) ..."."""
    cpuinfo = read_cpuinfo() if cpuinfo is None else cpuinfo
    return first_field(cpuinfo, "model name") or platform.processor() or "unknown CPU"


def cpu_flags(cpuinfo=None):
    """The set of the CPU's feature flags ("avx2", "avx512f", ...); empty off Linux."""
    cpuinfo = read_cpuinfo() if cpuinfo is None else cpuinfo
    return set((first_field(cpuinfo, "flags") or "").split())


def vector_units(flags):
    """"AVX-512", "AVX2 (no AVX-512)", "AVX (no AVX2)" or "vector units unknown"."""
    if "avx512f" in flags:
        return "AVX-512" + (" with VNNI" if "avx512_vnni" in flags else "")
    if "avx2" in flags:
        return "AVX2 (no AVX-512)"
    return "AVX (no AVX2)" if "avx" in flags else "vector units unknown"


def onednn(flags, environ=None, machine=None, system=None):
    """(on: True, False or None where unknown, why) of TensorFlow's oneDNN kernels.

    Args:
      flags: the CPU's feature flags (`cpu_flags()`).
      environ: the environment (default `os.environ`).
      machine: `platform.machine()` by default; system: `platform.system()` by default.
    """
    environ = os.environ if environ is None else environ
    setting = environ.get("TF_ENABLE_ONEDNN_OPTS")
    if setting is not None and setting.strip().lower() in ("0", "1", "true", "false"):
        return setting.strip().lower() in ("1", "true"), f"TF_ENABLE_ONEDNN_OPTS={setting}"
    machine = (machine or platform.machine()).lower()
    system = system or platform.system()
    if system != "Linux":
        return False, f"the default on {system}"
    if machine not in ("x86_64", "amd64"):
        return None, f"the default on {machine}: not determined"
    found = [flag for flag in ONEDNN_DEFAULT_FLAGS if flag in flags]
    if found:
        return True, f"the default on a CPU with {found[0]}"
    return False, "the default on a CPU without AVX-512 VNNI/BF16, AVX-VNNI or AMX"


def cores():
    """Logical CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count()


def describe(cpuinfo=None, environ=None):
    """One line naming the machine, e.g. "CPU: AMD EPYC 7B13, AVX2 (no AVX-512), 2 cores;
    TensorFlow oneDNN off (the default on a CPU without ...)"."""
    cpuinfo = read_cpuinfo() if cpuinfo is None else cpuinfo
    flags = cpu_flags(cpuinfo)
    on, why = onednn(flags, environ)
    return (f"CPU: {cpu_name(cpuinfo)}, {vector_units(flags)}, {cores()} cores; "
            f"TensorFlow oneDNN {({True: 'on', False: 'off'}).get(on, 'unknown')} ({why})")
