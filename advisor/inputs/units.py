"""Units at the boundary: turn "80 GiB", "400 Gbit/s", "989 TFLOP/s", "8k", "70B" into plain numbers.

Everything past the input models works in canonical plain numbers: bytes (int), bytes/s (float),
FLOP/s (float), token and parameter counts (int). A plain number given by a caller is taken to be
in those canonical units already, so "80 GiB" and 85899345920 are the same input.
"""

from __future__ import annotations

import math
import re
import sys
import threading
from importlib import resources

from ..errors import InputError

__all__ = [
    "UREG",     # noqa: F822 (module __getattr__ builds the pint registry on first use)
    "to_bytes",
    "to_device_memory",
    "device_memory_reading",
    "to_bytes_per_second",
    "to_flops_per_second",
    "to_count",
    "to_tokens",
    "format_bytes",
]

# pint and the registry load on first use: they are most of `import advisor`'s cost, and plain
# numbers (canonical units) never need them.
_REGISTRY: dict[str, object] = {}
_REGISTRY_LOCK = threading.Lock()


def registry():
    """The project's pint UnitRegistry (built once, thread-safe)."""
    if "ureg" not in _REGISTRY:
        with _REGISTRY_LOCK:
            if "ureg" not in _REGISTRY:
                import pint

                ureg = pint.UnitRegistry(str(resources.files(__package__) / "units_en.txt"),
                                         autoconvert_offset_to_baseunit=False, cache_folder=None)
                _REGISTRY.update(bytes=ureg.Quantity(1, "byte"), bytes_per_s=ureg.Quantity(1, "byte / second"),
                                 flops=ureg.Quantity(1, "flop / second"))
                _REGISTRY["ureg"] = ureg
    return _REGISTRY["ureg"]


def __getattr__(name: str):
    if name == "UREG":
        return registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _is_pint_quantity(value: object) -> bool:
    pint = sys.modules.get("pint")
    return pint is not None and isinstance(value, pint.Quantity)


# Suffixes for counts. Parameters use decimal multipliers ("70B" = 70e9, as model cards do);
# sequence lengths use binary ones ("8k" = 8192, "128k" = 131072, as context windows are quoted).
_DECIMAL_SUFFIX = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
_BINARY_SUFFIX = {"": 1, "k": 2**10, "K": 2**10, "M": 2**20}
# Longest quantity string read (pint's parser cost grows with the text; "989 TFLOP/s" is 11).
_MAX_TEXT = 100
_COUNT_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]?)\s*$")


# Upper bounds far beyond any real accelerator, so absurd inputs fail here, naming the field, rather
# than overflowing the rule engine's int64 facts later.
_LIMITS = {"bytes": 2.0**60, "bytes_per_s": 1e15, "flops": 1e19}
# Lower bounds, so that no accepted rate can make a time infinite (1e-300 B/s made a step time
# overflow, 5e-324 an empty search): a bandwidth of at least 100 MB/s, under the 125 MB/s of 1 Gbit/s
# Ethernet, the slowest link a GPU server has (HBM, NVLink, PCIe and InfiniBand are 10-10,000x faster);
# a compute rate of at least 1 TFLOP/s, under a V100's 15.7 TFLOP/s of FP32 alone (NVIDIA V100
# datasheet); at least one byte of memory.
_FLOORS = {"bytes": (1.0, "at least 1 byte"),
           "bytes_per_s": (1e8, "at least 100 MB/s: 1 Gbit/s Ethernet, the slowest link of a GPU server, moves 125 MB/s"),
           "flops": (1e12, "at least 1 TFLOP/s: a V100's FP32 units alone do 15.7 TFLOP/s")}


# The simple forms the presets and most callers write ("80 GiB", "80GB", "400 Gbit/s", "989 TFLOP/s")
# are read without pint, whose import and registry are most of a cold recommendation's cost. The
# factors are units_en.txt's; tests/test_units.py checks every form against pint to the last bit.
# Anything else (other spellings, expressions, Quantities, errors) goes to pint.
_PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_SIMPLE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P|E)?(B|bit|FLOP)(/s)?\s*$")
# reference -> (unit, per second) -> canonical units per unit
_SIMPLE_UNITS = {"bytes": {("B", False): 1.0, ("bit", False): 0.125},
                 "bytes_per_s": {("B", True): 1.0, ("bit", True): 0.125},
                 "flops": {("FLOP", True): 1.0}}


# Short forms users type, read as their long forms before anything else: a bare prefix on an amount
# of memory ("80G" = "80GB"), "TF"/"TFLOPS"/"TFLOP" on a compute rate ("989 TF" = "989 TFLOP/s": a
# rate is what a peak is; no one quotes FLOP counts for a GPU), "Gb/s"/"Gbps" on a bandwidth.
_SHORT_RE = {
    "bytes": re.compile(r"^(\s*[0-9]+(?:\.[0-9]+)?\s*(?:Ki|Mi|Gi|Ti|Pi|k|M|G|T|P|E))\s*$"),
    "flops": re.compile(r"^(\s*[0-9]+(?:\.[0-9]+)?\s*(?:k|M|G|T|P|E)?)(?:F|FLOPS|FLOP|FLOP/s|FLOPs)\s*$"),
}
_SHORT_UNIT = {"bytes": "B", "flops": "FLOP/s"}


def _expand_short(value: str, reference: str) -> str:
    """ "80G" -> "80GB" (bytes), "989 TF" -> "989 TFLOP/s" (flops); other text unchanged."""
    pattern = _SHORT_RE.get(reference)
    m = pattern.match(value) if pattern is not None else None
    return value if m is None else m.group(1).rstrip() + _SHORT_UNIT[reference]


def _simple(value: str, reference: str) -> float | None:
    m = _SIMPLE_RE.match(_expand_short(value, reference))
    if m is None:
        return None
    per_unit = _SIMPLE_UNITS[reference].get((m.group(3), m.group(4) is not None))
    if per_unit is None:
        return None                       # a unit of another kind: pint words the error
    magnitude = float(m.group(1)) * _PREFIX[m.group(2) or ""]
    return magnitude if per_unit == 1.0 else magnitude * per_unit


# Arithmetic in a quantity string: powers, products, sums, parentheses, division by a number
# ("GB/s" divides by a unit and stays; an exponent's sign, "1e+22 B", stays).
_ARITHMETIC = re.compile(r"\^|\*|(?<![eE])\+|[()]|/\s*[-+.0-9]")


def _quantity(value: object, field: str, reference: str, want: str) -> float:
    """Magnitude of `value` in the units of `reference`; plain numbers are already canonical."""
    if isinstance(value, bool):
        raise InputError(field, value, want)
    if isinstance(value, str) and len(value) <= _MAX_TEXT:
        value = _expand_short(value, reference)
    simple = _simple(value, reference) if isinstance(value, str) and len(value) <= _MAX_TEXT else None
    if simple is not None:
        magnitude = simple
    elif isinstance(value, (int, float)):
        try:
            magnitude = float(value)
        except OverflowError:                 # an int beyond the float range, e.g. 10**400
            raise InputError(field, value, want, hint="must be a finite number greater than zero") from None
    elif isinstance(value, str) or _is_pint_quantity(value):
        ureg = registry()
        import pint

        if isinstance(value, str) and (len(value) > _MAX_TEXT or _ARITHMETIC.search(value)):
            # pint evaluates expressions: "9^9^9 GiB" would never return (hostile input), and "80 GiB * 2"
            # would quietly be 160 GiB. A quantity is one number and a unit.
            raise InputError(field, value, want,
                             hint=f"one number and a unit, at most {_MAX_TEXT} characters, no arithmetic")
        try:
            q = ureg.Quantity(value) if isinstance(value, str) else ureg.Quantity(value.magnitude, str(value.units))
        except Exception as exc:  # pint's parser also raises TokenError, AssertionError, ZeroDivisionError, ...
            raise InputError(field, value, want, hint=f"could not read it as a quantity ({type(exc).__name__})") from None
        if isinstance(value, str) and _is_plain_number(value):
            # "80" could mean GB, GiB or bytes: a string must say its unit. Plain numbers (not
            # strings) are canonical units by contract.
            raise InputError(field, value, want, hint="a string needs a unit; pass a plain number for canonical units")
        else:
            try:
                magnitude = float(q.to(_REGISTRY[reference].units).magnitude)
            except pint.errors.DimensionalityError:
                raise InputError(field, value, want, hint=f"'{q.units:~}' is not a unit of this kind") from None
            except Exception as exc:  # e.g. OverflowError: a magnitude beyond the float range
                raise InputError(field, value, want, hint=f"could not convert it ({type(exc).__name__})") from None
    else:
        raise InputError(field, value, want)
    if not math.isfinite(magnitude) or magnitude <= 0:
        raise InputError(field, value, want, hint="must be a finite number greater than zero")
    floor, floor_text = _FLOORS[reference]
    if magnitude < floor:
        raise InputError(field, value, want, hint=floor_text)
    if magnitude > _LIMITS[reference]:
        raise InputError(field, value, want, hint=f"at most {_LIMITS[reference]:.3g} {reference.replace('_', ' ')}")
    return magnitude


def _is_plain_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def to_bytes(value: object, field: str) -> int:
    """Bytes as an int: "80 GiB", "80GB", a pint Quantity, or a plain number of bytes."""
    return int(round(_quantity(value, field, "bytes", 'an amount of memory such as "80 GiB" or "80GB"')))


# Device memory: vendors print HBM/GDDR capacity as "80GB", "141GB", "192GB", and mean binary units:
# the stacks hold 2**n GiB (an A100 80GB is 5 x 16 GiB stacks; nvidia-smi reports an H100 80GB's
# 81559 MiB = 79.6 GiB usable of 80 GiB built; NVIDIA A100/H100 datasheets, nvidia-smi). So in
# GPU.memory (and --gpu-memory), and only there, "GB"/"TB" (or a bare "G"/"T") are read as
# GiB/TiB, as the shipped presets are written; "GiB" and plain numbers of bytes are taken as they are.
# Everywhere else "GB" is 10**9 bytes (bandwidths: "900 GB/s" is decimal on every datasheet).
_VENDOR_MEMORY_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([MGTP])B?\s*$")


def device_memory_reading(value: object) -> str | None:
    """How a device-memory string in the vendor's decimal spelling was read, for echoing: for "80GB",
    'memory 80GB read as 80 GiB (the vendor's GB: HBM capacity is binary)'; None for other inputs."""
    m = _VENDOR_MEMORY_RE.match(value) if isinstance(value, str) else None
    if m is None:
        return None
    return f"memory {value.strip()} read as {m.group(1)} {m.group(2)}iB (the vendor's GB: HBM capacity is binary)"


def to_device_memory(value: object, field: str) -> int:
    """A GPU's memory in bytes: "80GB" / "80 GB" / "80G" as the vendor means it (80 GiB), "80 GiB",
    a pint Quantity, or a plain number of bytes."""
    m = _VENDOR_MEMORY_RE.match(value) if isinstance(value, str) and len(value) <= _MAX_TEXT else None
    if m is not None:
        value = f"{m.group(1)} {m.group(2)}iB"
    return to_bytes(value, field)


def to_bytes_per_second(value: object, field: str) -> float:
    """Bandwidth in bytes/s: "400 Gbit/s", "50 GB/s", "900 GB/s", or a plain number of bytes/s."""
    return _quantity(value, field, "bytes_per_s", 'a bandwidth such as "400 Gbit/s" or "50 GB/s"')


def to_flops_per_second(value: object, field: str) -> float:
    """Compute rate in FLOP/s: "989 TFLOP/s", "989 TFLOPS", or a plain number of FLOP/s."""
    return _quantity(value, field, "flops", 'a compute rate such as "989 TFLOP/s" or "989 TF"')


def _count(value: object, field: str, suffixes: dict[str, int], want: str) -> int:
    if isinstance(value, bool):
        raise InputError(field, value, want)
    if isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise InputError(field, value, want, hint="must be a whole, finite number")
        number = int(value)
    elif isinstance(value, str):
        m = _COUNT_RE.match(value)
        if not m or m.group(2) not in suffixes:
            raise InputError(field, value, want)
        exact = float(m.group(1)) * suffixes[m.group(2)]
        if not math.isfinite(exact) or abs(exact - round(exact)) > 1e-6 * max(1.0, exact):
            raise InputError(field, value, want, hint="must come out as a whole number")
        number = int(round(exact))
    else:
        raise InputError(field, value, want)
    if number <= 0:
        raise InputError(field, value, want, hint="must be greater than zero")
    return number


def to_count(value: object, field: str) -> int:
    """A parameter count: 70000000000, "70B", "1.5e9", "46.7B", "175e9" (decimal suffixes k, M, B, T)."""
    return _count(value, field, _DECIMAL_SUFFIX, 'a count such as "70B", "1.5e9" or 7000000000')


def to_tokens(value: object, field: str) -> int:
    """A sequence length in tokens: 8192, "8k" (= 8192), "128k" (= 131072), "1M" (= 1048576)."""
    return _count(value, field, _BINARY_SUFFIX, 'a token count such as 4096, "8k" or "128k"')


def format_bytes(n: float) -> str:
    """Human form for reports: binary units, as nvidia-smi and the papers' GiB figures use."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
