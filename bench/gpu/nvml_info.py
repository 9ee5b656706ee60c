"""Read-only NVML queries: power limit and its range, energy counter, clocks.

This module never sets anything (no power limit, no clocks, no MIG mode).
It needs nvidia-ml-py (`import pynvml`); without it every query returns None
and `error` says why. Run it alone to print the GPU's facts as JSON:

    python3 bench/gpu/nvml_info.py
"""

import json
import sys

try:
    import pynvml
except ImportError:  # nvidia-ml-py is not installed
    pynvml = None

_handle = None
_error = None


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def handle(uuid=None):
    """The NVML handle of the GPU with this UUID (CUDA's device 0 when the
    caller passes torch's uuid), else NVML index 0. None when NVML is absent."""
    global _handle, _error
    if _handle is not None or _error is not None:
        return _handle
    if pynvml is None:
        _error = "pynvml (nvidia-ml-py) is not installed"
        return None
    try:
        pynvml.nvmlInit()
        h = None
        if uuid:
            u = uuid if str(uuid).startswith("GPU-") else "GPU-" + str(uuid)
            try:
                h = pynvml.nvmlDeviceGetHandleByUUID(u)
            except pynvml.NVMLError:
                h = None
        _handle = h if h is not None else pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception as e:  # NVML present but unusable (no driver, no GPU)
        _error = "NVML: %s" % e
    return _handle


def _q(fn, *args):
    try:
        return fn(*args)
    except Exception:
        return None


def energy_mj(h=None):
    """Total energy since the driver loaded, in millijoules (Volta and newer)."""
    h = h or handle()
    return None if h is None else _q(pynvml.nvmlDeviceGetTotalEnergyConsumption, h)


def info(uuid=None):
    """A dict of read-only facts about the GPU; watts and MHz."""
    h = handle(uuid)
    if h is None:
        return {"error": _error}
    mw = lambda v: None if v is None else v / 1000.0  # noqa: E731
    cons = _q(pynvml.nvmlDeviceGetPowerManagementLimitConstraints, h)
    out = {
        "name": _text(_q(pynvml.nvmlDeviceGetName, h)),
        "uuid": _text(_q(pynvml.nvmlDeviceGetUUID, h)),
        "driver": _text(_q(pynvml.nvmlSystemGetDriverVersion)),
        "nvml_version": _text(_q(pynvml.nvmlSystemGetNVMLVersion)),
        "power_limit_w": mw(_q(pynvml.nvmlDeviceGetPowerManagementLimit, h)),
        "power_default_w": mw(_q(pynvml.nvmlDeviceGetPowerManagementDefaultLimit, h)),
        "power_enforced_w": mw(_q(pynvml.nvmlDeviceGetEnforcedPowerLimit, h)),
        "power_range_w": None if cons is None else [cons[0] / 1000.0, cons[1] / 1000.0],
        "power_usage_w": mw(_q(pynvml.nvmlDeviceGetPowerUsage, h)),
        "energy_mj": energy_mj(h),
        "sm_clock_mhz": _q(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
        "sm_clock_max_mhz": _q(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM),
        "mem_clock_max_mhz": _q(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_MEM),
        "temperature_c": _q(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU),
    }
    mig = _q(pynvml.nvmlDeviceGetMigMode, h)
    out["mig_mode"] = None if mig is None else list(mig)
    return out


if __name__ == "__main__":
    facts = info()
    json.dump(facts, sys.stdout, indent=1)
    print()
    sys.exit(1 if "error" in facts else 0)
