"""Inspect a compiled candidate library: what it imports and what runs when it is loaded, against an allowlist.

The static screen (ksci/evaluate/screen/source.py) reads source text, so a name spelt in a way it does not know (an assembler label
split over two string literals, a declaration of Python's C API under a macro) gets past it. What the linker wrote
into the library does not depend on spelling: every function the host code can call in another library is an
undefined dynamic symbol, and every function that runs at load time is an entry of `.init_array` (or `.ctors`,
`.preinit_array`). A candidate library may import only what a GEMM-like kernel's host code needs — the GPU
runtime's launch, registration, error and attribute functions, device allocation, asynchronous copies on the
given stream — and basic C/C++ runtime support; and its only load-time code may be the toolchain's own (the
runtime's registration of the fat binary, the C runtime's frame_dummy). Anything else is refused before the
library is ever loaded, with the names that broke the rule:

- Python's C API (a library in the harness's process could otherwise reach and rewrite the harness's objects),
  dynamic loading (dlopen/dlsym), threads, processes, signals, files, sockets, clocks, memory mapping and
  protection;
- streams, events, graphs, host callbacks, host-mapped and pinned host memory, peer access and IPC, device-wide
  synchronisation (none of which a kernel needs to compute its output on the stream it is given).

CUDA libraries are built with `-cudart shared` (ksci/evaluate/toolchain/toolchains.py), so they import the runtime by name instead
of linking a static copy (which imports dlopen, pthreads and files itself). `cudaGetDriverEntryPoint` is allowed
because TMA descriptors (`cuTensorMapEncodeTiled`) are reached through it, as CUTLASS and DeepGEMM do; a
driver function obtained that way is out of this check's sight, and the harness's dynamic checks (fresh inputs,
checked outputs, the device-idle check after each timed call, the parent's clock) are what stand behind it
(docs/threat-model.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

# Undefined symbols every shared object built by gcc/clang may carry (weak hooks and C++ runtime support). `exit`:
# nvcc's host stub of any non-inline __device__ function calls it, so without it every kernel with a plain
# __device__ helper was `rejected` (it ends the harness child, which is a runtime_error, never an ok).
_COMMON = (
    r"_ITM_(de)?registerTMCloneTable|__gmon_start__|__cxa_finalize|__cxa_atexit|__cxa_guard_(acquire|release|abort)"
    r"|__cxa_(allocate|free)_exception|__cxa_(begin|end)_catch|__cxa_(re)?throw|__cxa_pure_virtual"
    r"|__cxa_call_unexpected|__gxx_personality_v0|_Unwind_Resume|__stack_chk_fail|__assert_fail|abort|exit"
    r"|_ZSt9terminatev|_ZSt(9|1[0-9]|2[0-9])__throw_\w+|_ZNSt9bad_allocD\w+|_ZTI\w+|_ZTV\w+"
    r"|_Zn[wa][jm](St11align_val_t)?(RKSt9nothrow_t)?|_Zd[la]Pv[jm]?(St11align_val_t)?(RKSt9nothrow_t)?"
    r"|mem(cpy|set|move|cmp|chr)|str(len|cmp|ncmp|chr|rchr|str|cpy|ncpy)|malloc|calloc|realloc|free|aligned_alloc"
    r"|posix_memalign|(sn)?printf|puts|putchar|fputs|fputc|fprintf|fflush|stdout|stderr|__printf_chk|__fprintf_chk"
    r"|__snprintf_chk|__memcpy_chk|__memset_chk|__errno_location"
    # host-side arithmetic a launch configuration may use
    r"|(sqrt|exp|exp2|log|log2|pow|ceil|floor|fabs|fmin|fmax|round|trunc|frexp|ldexp)f?"
)

_CUDA = (
    r"__cuda(RegisterFatBinary|RegisterFatBinaryEnd|RegisterFunction|RegisterVar|RegisterManagedVar"
    r"|RegisterHostVar|UnregisterFatBinary|PushCallConfiguration|PopCallConfiguration|LaunchKernel|GetKernel"
    r"|InitModule)"
    r"|cuda(GetLastError|PeekAtLastError|GetErrorString|GetErrorName|LaunchKernel|LaunchKernelExC"
    r"|LaunchCooperativeKernel|FuncSetAttribute|FuncGetAttributes|FuncSetCacheConfig|FuncGetName"
    r"|OccupancyMaxActiveBlocksPerMultiprocessor(WithFlags)?|OccupancyMaxPotentialBlockSize\w*"
    r"|OccupancyAvailableDynamicSMemPerBlock|OccupancyMaxPotentialClusterSize|OccupancyMaxActiveClusters"
    r"|GetDevice|GetDeviceCount|GetDeviceProperties(_v2)?|DeviceGetAttribute|DriverGetVersion|RuntimeGetVersion"
    r"|MemsetAsync|Memset2DAsync|MemcpyAsync|Memcpy2DAsync|MemcpyToSymbolAsync|MemcpyFromSymbolAsync"
    r"|Malloc|Free|MallocAsync|FreeAsync|GetSymbolAddress|GetSymbolSize|GetDriverEntryPoint(ByVersion)?"
    r"|GetFuncBySymbol|StreamGetDevice)"
)

_HIP = (
    r"__hip(RegisterFatBinary|RegisterFunction|RegisterVar|RegisterManagedVar|RegisterSurface|RegisterTexture"
    r"|UnregisterFatBinary|PushCallConfiguration|PopCallConfiguration)"
    r"|hip(GetLastError|PeekAtLastError|GetErrorString|GetErrorName|LaunchKernel|ExtLaunchKernel"
    r"|LaunchCooperativeKernel|FuncSetAttribute|FuncGetAttributes|FuncGetAttribute|FuncSetCacheConfig"
    r"|OccupancyMaxActiveBlocksPerMultiprocessor(WithFlags)?|OccupancyMaxPotentialBlockSize\w*"
    r"|GetDevice|GetDeviceCount|GetDevicePropertiesR0600|GetDeviceProperties|DeviceGetAttribute"
    r"|DriverGetVersion|RuntimeGetVersion|MemsetAsync|MemsetD32Async|MemsetD16Async|MemsetD8Async|Memset2DAsync"
    r"|MemcpyAsync|Memcpy2DAsync|MemcpyToSymbolAsync|MemcpyFromSymbolAsync|Malloc|Free|MallocAsync|FreeAsync"
    r"|GetSymbolAddress|GetSymbolSize)"
)

ALLOWED_IMPORTS = {
    "cuda": re.compile(rf"(?:{_COMMON}|{_CUDA})"),
    "rocm": re.compile(rf"(?:{_COMMON}|{_HIP})"),
}

# Functions that may run when the library is loaded (or unloaded): the C runtime's and the GPU toolchain's own.
ALLOWED_INITIALISERS = {
    "cuda": re.compile(r"frame_dummy|__do_global_dtors_aux|_ZL24__sti____cudaRegisterAllv|__sti____cudaRegisterAll"),
    "rocm": re.compile(r"frame_dummy|__do_global_dtors_aux|__hip_module_ctor|__hip_module_dtor"),
}
_INIT_SECTIONS = (".init_array", ".preinit_array", ".ctors", ".fini_array", ".dtors")


@dataclass
class LibraryCheck:
    ok: bool
    reasons: list[str] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)  # undefined dynamic symbols, version suffix removed
    initialisers: list[str] = field(default_factory=list)  # what .init_array & co. point to

    @property
    def message(self) -> str:
        return "; ".join(self.reasons)


def check_library(path: str | Path, target: str) -> LibraryCheck:
    """Hold the library's dynamic imports and load-time functions against the target's allowlist."""
    try:
        with open(path, "rb") as fh:
            elf = ELFFile(fh)
            imports = sorted(_undefined_dynamic_symbols(elf))
            initialisers = _initialisers(elf)
    except (OSError, ELFError) as exc:
        return LibraryCheck(False, [f"the compiled library could not be read as ELF: {exc}"])
    allowed = ALLOWED_IMPORTS[target]
    refused = [name for name in imports if not allowed.fullmatch(name)]
    strange = [name for name in initialisers if not ALLOWED_INITIALISERS[target].fullmatch(name)]
    reasons = []
    if refused:
        reasons.append(
            f"the library imports {_names(refused)}, outside what a kernel's host code may call "
            "(docs/threat-model.md, ksci/evaluate/screen/library.py; a function declared but defined nowhere shows here too)"
        )
    if strange:
        reasons.append(f"the library runs code of its own when it is loaded or unloaded: {_names(strange)}")
    return LibraryCheck(not reasons, reasons, imports, initialisers)


def _names(names: list[str], shown: int = 8) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _undefined_dynamic_symbols(elf: ELFFile) -> set[str]:
    table = elf.get_section_by_name(".dynsym")
    if not isinstance(table, SymbolTableSection):
        return set()
    return {
        symbol.name.split("@")[0]
        for symbol in table.iter_symbols()
        if symbol.name and symbol["st_shndx"] == "SHN_UNDEF"
    }


def _initialisers(elf: ELFFile) -> list[str]:
    """Names of the functions that the load-time tables point to (`<unknown 0x..>` when no symbol names one)."""
    by_address = _function_names(elf)
    names = []
    for section_name in _INIT_SECTIONS:
        section = elf.get_section_by_name(section_name)
        if section is None or section["sh_size"] == 0:
            continue
        for address in _table_entries(elf, section):
            if address in (0, 2**64 - 1):  # .ctors/.dtors sentinels
                continue
            names.append(by_address.get(address, f"<unknown 0x{address:x} in {section_name}>"))
    return names


def _table_entries(elf: ELFFile, section) -> list[int]:
    """The addresses stored in a table of function pointers, with relocations applied (RELATIVE addends)."""
    width = 8 if elf.elfclass == 64 else 4
    data = section.data()
    start = section["sh_addr"]
    entries = {
        start + i: int.from_bytes(data[i : i + width], "little" if elf.little_endian else "big")
        for i in range(0, len(data) - width + 1, width)
    }
    for relocations in elf.iter_sections():
        if not isinstance(relocations, RelocationSection):
            continue
        symbols = elf.get_section(relocations["sh_link"]) if relocations["sh_link"] else None
        for reloc in relocations.iter_relocations():
            offset = reloc["r_offset"]
            if offset not in entries:
                continue
            addend = reloc["r_addend"] if reloc.is_RELA() else entries[offset]
            symbol_value = 0
            if reloc["r_info_sym"] and isinstance(symbols, SymbolTableSection):
                symbol_value = symbols.get_symbol(reloc["r_info_sym"])["st_value"]
            entries[offset] = symbol_value + addend
    return list(entries.values())


def _function_names(elf: ELFFile) -> dict[int, str]:
    names: dict[int, str] = {}
    for section in elf.iter_sections():
        if not isinstance(section, SymbolTableSection):
            continue
        for symbol in section.iter_symbols():
            if symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_value"] and symbol.name:
                names.setdefault(symbol["st_value"], symbol.name)
    return names
