"""Seam: ``torch._inductor.cpu_vec_isa``, Inductor's question "which vector instruction sets does this CPU run?".

Every process that compiles C++ with Inductor asks it once, before its first kernel:
for each ISA the CPU claims (``x86_isa_checker``), a tiny program is built (cached in
the Inductor cache) and loaded in a child process (never cached), about 1.5 s in all.
The answer is the machine's, not the program's, so a repro's run elsewhere may have it
asked before the repro arrives (:mod:`minifier.stages.elsewhere`), as it has torch
imported. :data:`PREPAY` is that question as torch-only source, asked the way
``valid_vec_isa_list`` asks it with ``cpp.vec_isa_ok`` unset (``VecISA.__bool__impl(None)``,
cached per ISA); it fills nothing else, so a repro that sets ``vec_isa_ok`` or ``simdlen``
still gets its own answer. On a torch where the names moved it does nothing.
"""

from __future__ import annotations

from . import Seam

SEAM = Seam(
    wraps="torch._inductor.cpu_vec_isa (supported_vec_isa_list, x86_isa_checker, VecISA.__bool__impl)",
    features=("a repro's run elsewhere, before the repro is written",),
)

#: Torch-only source (it runs where pt2kit cannot be imported): the ISA probes of the
#: default config, asked now. It never raises.
PREPAY = (
    "try:\n"
    "    import platform as _platform\n"
    "    from torch._inductor import cpu_vec_isa as _isa\n"
    "    if _platform.machine() in ('x86_64', 'AMD64'):\n"
    "        _flags = _isa.x86_isa_checker()\n"
    "        for _v in _isa.supported_vec_isa_list:\n"
    "            if all(_f in _flags for _f in str(_v).split()):\n"
    "                _v._VecISA__bool__impl(None)\n"
    "except Exception:\n"
    "    pass\n"
)


def probe() -> None:
    import inspect

    from torch._inductor import cpu_vec_isa

    if not callable(getattr(cpu_vec_isa, "x86_isa_checker", None)):
        raise AttributeError("torch._inductor.cpu_vec_isa.x86_isa_checker is gone")
    isas = list(cpu_vec_isa.supported_vec_isa_list)
    if not isas:
        raise AttributeError("torch._inductor.cpu_vec_isa.supported_vec_isa_list is empty")
    bool_impl = getattr(type(isas[0]), "_VecISA__bool__impl", None)
    if bool_impl is None or not hasattr(bool_impl, "cache_info"):
        raise AttributeError("VecISA.__bool__impl is gone, or no longer cached")
    if list(inspect.signature(bool_impl).parameters) != ["self", "vec_isa_ok"]:
        raise AttributeError("VecISA.__bool__impl no longer takes (vec_isa_ok)")
