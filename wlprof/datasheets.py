"""Vendor datasheet peaks of GPUs, and the device names (as torch and Kineto record them) they belong to.

A sheet holds the dense (no sparsity) peak TFLOP/s of each dtype the GPU's matrix units run, the fp32
rate of its vector units, and its memory bandwidth, with the document each number comes from. Where a
vendor quotes only rates with 2:4 structured sparsity, the sheet holds half of them (`halved`).

A device name matches a sheet when the sheet's pattern is found in it, its capacity is the sheet's where
the sheet names one (a size in the name and `totalGlobalMem`, each where given, at least one), and its
SM or CU count (`numSms`) is the sheet's where the sheet names one; a GPU whose trace names it only by its properties (ROCm may write an
empty name) matches by its compute capability, units and memory. A name that matches no sheet, or more
than one, has none: a wrong variant's numbers are worse than none. These numbers are never what the GPU
reaches (`wlprof calibrate` measures that); they are used only where asked for (`--ceilings datasheet`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Documents, by title (the numbers below are read from them).
A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet"
A10_SHEET = "NVIDIA A10 Tensor Core GPU datasheet"
A40_SHEET = "NVIDIA A40 datasheet"
L4_SHEET = "NVIDIA L4 Tensor Core GPU datasheet"
L40_SHEET = "NVIDIA L40 datasheet"
L40S_SHEET = "NVIDIA L40S datasheet"
T4_SHEET = "NVIDIA T4 Tensor Core GPU datasheet"
V100_SHEET = "NVIDIA Tesla V100 GPU Accelerator datasheet"
H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet"
H200_SHEET = "NVIDIA H200 Tensor Core GPU datasheet"
B200_SHEET = "NVIDIA HGX B200 specifications (per GPU)"
GA102_PAPER = "NVIDIA Ampere GA102 GPU Architecture whitepaper"
ADA_PAPER = "NVIDIA Ada GPU Architecture whitepaper"
MI300X_SHEET = "AMD Instinct MI300X Accelerator datasheet"
MI200_SHEET = "AMD Instinct MI200 series (MI250X, MI250) and MI210 accelerator datasheets"


@dataclass(frozen=True)
class Sheet:
    """One GPU's datasheet peaks (dense TFLOP/s per dtype, fp32 vector TFLOP/s, GB/s) and how its name is told."""

    key: str  # what the GPU is called here: 'A100 SXM4 80GB'
    pattern: str  # a regular expression (case-insensitive) found in the device name
    tflops: dict[str, float]  # dense matrix peak per dtype: bfloat16, float16, tf32, float32 (the fp32 GEMM rate)
    vector_tflops: float  # fp32 on the vector (non-tensor) units
    gbps: float  # memory bandwidth, bytes read + written per second
    source: str
    halved: bool = False  # the vendor quotes matrix rates with sparsity only: these are half of those
    memory_gb: int | None = None  # the capacity this variant has (decimal GB, as sold), where variants differ in it
    units: int | None = None  # its SM (CU) count as `numSms` records it, where variants differ in it
    signature: tuple[int, int, int, int] | None = None  # (compute major, minor, units, GB): a GPU the trace leaves unnamed
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The sheet as recorded beside ceilings: the rates by dtype, `vector`, `copy_gbps`, `source`."""
        return {**self.tflops, "vector": self.vector_tflops, "copy_gbps": self.gbps, "source": self.source,
                "sheet": self.key, "sparsity_halved": self.halved, **({"note": self.note} if self.note else {})}


def _nv(bf16: float | None, fp16: float, tf32: float | None, fp32: float) -> dict[str, float]:
    """The matrix rates of an NVIDIA GPU: the fp32 GEMM runs on the CUDA cores (TF32 off) at the fp32 rate."""
    out = {"bfloat16": bf16, "float16": fp16, "tf32": tf32, "float32": fp32}
    return {k: v for k, v in out.items() if v is not None}


_AMD_UNNAMED = r"^(?:AMD GPU \(|$)"  # a ROCm GPU the trace did not name (`trace.identity.described`)

SHEETS: tuple[Sheet, ...] = (
    # Volta and Turing: tensor cores multiply fp16 only (no bf16, no TF32)
    Sheet("V100 SXM2", r"\bV100-SXM2\b", _nv(None, 125.0, None, 15.7), 15.7, 900.0, V100_SHEET),
    Sheet("V100 PCIe", r"\bV100-PCIE\b", _nv(None, 112.0, None, 14.0), 14.0, 900.0, V100_SHEET),
    Sheet("T4", r"\bT4\b", _nv(None, 65.0, None, 8.1), 8.1, 320.0, T4_SHEET,
          note="65 TFLOP/s is the sheet's mixed-precision (fp16 in, fp32 accumulate) rate"),
    # Ampere: the datasheets give dense and sparse rates side by side
    Sheet("A100 40GB", r"\bA100\b", _nv(312.0, 312.0, 156.0, 19.5), 19.5, 1555.0, A100_SHEET, memory_gb=40,
          note="SXM4 and PCIe 40GB share these numbers"),
    Sheet("A100 SXM4 80GB", r"\bA100\b.*\bSXM", _nv(312.0, 312.0, 156.0, 19.5), 19.5, 2039.0, A100_SHEET,
          memory_gb=80),
    Sheet("A100 PCIe 80GB", r"\bA100\b.*\bPCIe\b", _nv(312.0, 312.0, 156.0, 19.5), 19.5, 1935.0, A100_SHEET,
          memory_gb=80),
    Sheet("A10", r"\bA10\b", _nv(125.0, 125.0, 62.5, 31.2), 31.2, 600.0, A10_SHEET),
    Sheet("A40", r"\bA40\b", _nv(149.7, 149.7, 74.8, 37.4), 37.4, 696.0, A40_SHEET),
    Sheet("GeForce RTX 3090", r"\bRTX 3090\b(?!\s*Ti)", _nv(71.0, 71.0, 35.6, 35.6), 35.6, 936.0, GA102_PAPER,
          note="fp16 and bf16 with fp32 accumulate (what torch's GEMMs use; GeForce runs them at half the "
               "fp16-accumulate rate)"),
    # Ada
    Sheet("L4", r"\bL4\b", _nv(121.0, 121.0, 60.0, 30.3), 30.3, 300.0, L4_SHEET, halved=True),
    Sheet("L40", r"\bL40\b", _nv(181.05, 181.05, 90.5, 90.5), 90.5, 864.0, L40_SHEET),
    Sheet("L40S", r"\bL40S\b", _nv(362.05, 362.05, 183.0, 91.6), 91.6, 864.0, L40S_SHEET),
    Sheet("GeForce RTX 4090", r"\bRTX 4090\b(?!\s*D)", _nv(165.2, 165.2, 82.6, 82.6), 82.6, 1008.0, ADA_PAPER,
          note="fp16 and bf16 with fp32 accumulate (what torch's GEMMs use; GeForce runs them at half the "
               "fp16-accumulate rate)"),
    # Hopper: the datasheets quote tensor rates with sparsity
    Sheet("H100 SXM5", r"\bH100\b.*(?:\bSXM|\b80GB HBM3\b)", _nv(989.5, 989.5, 494.5, 67.0), 67.0, 3350.0,
          H100_SHEET, halved=True, memory_gb=80),
    Sheet("H100 PCIe", r"\bH100\b.*\bPCIe\b", _nv(756.5, 756.5, 378.0, 51.0), 51.0, 2000.0, H100_SHEET,
          halved=True),
    Sheet("H200 SXM", r"\bH200\b(?!.*\bNVL\b)", _nv(989.5, 989.5, 494.5, 67.0), 67.0, 4800.0, H200_SHEET,
          halved=True),
    # Blackwell
    Sheet("B200 (HGX, 180GB)", r"\bB200\b", _nv(2250.0, 2250.0, 1100.0, 75.0), 75.0, 7700.0, B200_SHEET,
          halved=True, memory_gb=180),
    # CDNA: the fp32 GEMM runs on the matrix cores, faster than the vector units (MI210, MI250X)
    Sheet("MI210", r"\bMI210\b", {"bfloat16": 181.0, "float16": 181.0, "float32": 45.3}, 22.6, 1600.0,
          MI200_SHEET),
    Sheet("MI250X (one GCD)", r"\bMI250X\b", {"bfloat16": 191.5, "float16": 191.5, "float32": 47.85}, 23.95,
          1600.0, MI200_SHEET, units=110,
          note="torch sees each of the module's two dies (GCDs) as a GPU: half of the module's numbers"),
    Sheet("MI250 (one GCD)", r"\bMI250\b", {"bfloat16": 181.05, "float16": 181.05, "float32": 45.25}, 22.6,
          1600.0, MI200_SHEET, units=104,
          note="torch sees each of the module's two dies (GCDs) as a GPU: half of the module's numbers"),
    Sheet("MI300X", r"\bMI300X\b", {"bfloat16": 1307.4, "float16": 1307.4, "tf32": 653.7, "float32": 163.4}, 163.4,
          5300.0, MI300X_SHEET, signature=(9, 4, 304, 192)),
)

_SIZE_IN_NAME = re.compile(r"(?<![\d.])(\d{2,3})\s?GB?\b", re.IGNORECASE)  # '80GB', '40GB', '141G'
_MEMORY_TOLERANCE = 0.05  # a capacity matches within 5% (totalGlobalMem is the usable memory, in bytes)


def _capacity_gb(name: str, props: dict | None) -> list[float]:
    """What a device says its capacity is: the first size its name states and its totalGlobalMem in GiB (a
    GPU sold as 80 GB reports about 79 GiB usable), each where it has one."""
    sizes = [float(m) for m in _SIZE_IN_NAME.findall(name)][:1]
    mem = (props or {}).get("totalGlobalMem")
    return sizes + ([mem / 2**30] if isinstance(mem, (int, float)) and mem > 0 else [])


def _fits(sheet: Sheet, name: str, props: dict | None) -> bool:
    if sheet.signature is not None and re.search(_AMD_UNNAMED, name):
        return _signature_fits(sheet.signature, props)
    if not re.search(sheet.pattern, name, re.IGNORECASE):
        return False
    if sheet.memory_gb is not None:
        caps = _capacity_gb(name, props)
        if not caps or not all(abs(c - sheet.memory_gb) <= _MEMORY_TOLERANCE * sheet.memory_gb for c in caps):
            return False
    if sheet.units is not None and (props or {}).get("numSms") != sheet.units:
        return False
    return True


def _signature_fits(sig: tuple[int, int, int, int], props: dict | None) -> bool:
    p = props or {}
    major, minor, units, gb = sig
    mem = p.get("totalGlobalMem")
    return (p.get("computeMajor") == major and p.get("computeMinor") == minor and p.get("numSms") == units
            and isinstance(mem, (int, float)) and abs(mem / 2**30 - gb) <= _MEMORY_TOLERANCE * gb)


def matching(name: str, props: dict | None = None) -> list[Sheet]:
    """Every sheet a device name (and its deviceProperties entry) fits."""
    return [s for s in SHEETS if _fits(s, str(name or ""), props)]


def sheet_for(name: str, props: dict | None = None) -> Sheet | None:
    """The one sheet a device fits, or None (no sheet fits, or several do: the name does not tell them apart)."""
    found = matching(name, props)
    return found[0] if len(found) == 1 else None


def known() -> list[str]:
    """The GPUs that have a sheet, by key."""
    return [s.key for s in SHEETS]
