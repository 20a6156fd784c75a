"""Memory as people write it, read by one function on every surface (the New job and Sessions
forms, profile files and their overrides, the API's session body, and so the CLI), and written back
the way Slurm writes it. The rules are documented in docs/profiles.md ("Memory") and
docs/decisions.md#a-bare-memory-number-means-gb.

- A unit, any case, with or without a space: ``K``/``KB``/``KiB``, ``M``/``MB``/``MiB``,
  ``G``/``GB``/``GiB``, ``T``/``TB``/``TiB``. Units are binary, as Slurm's ``--mem`` reads them:
  ``1G`` = ``1GB`` = ``1GiB`` = 1024 MiB, ``1T`` = 1024 GiB.
- A bare number (``4``, ``4.5``, YAML's or JSON's ``4``) means **GB** everywhere. Slurm's own
  ``--mem=4000`` means MiB; to keep a number meant that way (profile files once read a bare number
  as MiB) from becoming 4000 GB, a bare number of 1024 or more is refused with a
  sentence that says what to write (``4000M``, or ``4000G``).
- Fractions are kept to the MiB, rounded up (``0.1G`` -> 103 MiB): never less than asked.

Refusals are :class:`MemoryRefusal` (a ``ValueError``), one kind each, every sentence ending with
:data:`ACCEPTED`: not a size (``invalid``), zero or negative (``not_positive``), more than
:data:`MAX_MEMORY_MIB` (``too_big``), a bare number of 1024 or more (``unclear``).
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal

__all__ = ["ACCEPTED", "MAX_MEMORY_MIB", "MemoryRefusal", "memory_mib", "memory_text"]

#: The sentence every refusal ends with: which units are accepted, and what a bare number means.
ACCEPTED = "Give memory as 4G, 4000M or 1.5T (a bare number means GB)."
#: The most memory one request may name: 64 TiB, in MiB (more than any node has; site policy then
#: checks the request against the partition's largest suitable node).
MAX_MEMORY_MIB = 64 * 1024 * 1024
#: A bare number this large or larger is refused as unclear (most likely MiB, as Slurm reads it).
UNCLEAR_BARE_GB = 1024

_MIB_PER = {"K": Decimal(1) / 1024, "M": Decimal(1), "G": Decimal(1024), "T": Decimal(1024 * 1024)}
_SIZE = re.compile(r"(?P<sign>-?)\s*(?P<number>[0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*(?:(?P<unit>[KMGT])(?:I?B)?)?", re.IGNORECASE)
_SHOWN = 24  # characters of a refused value echoed back
_LONGEST = 200  # longer text is not an amount of memory (and is not matched at all)


class MemoryRefusal(ValueError):
    """An amount of memory that is refused. ``str()`` is the sentence (what was wrong, then
    :data:`ACCEPTED`); ``code`` the kind: ``invalid``, ``not_positive``, ``too_big`` or ``unclear``."""

    def __init__(self, code: str, sentence: str):
        self.code = code
        super().__init__(f"{sentence} {ACCEPTED}")


def memory_mib(value: str | int | float | Decimal) -> int:
    """An amount of memory as typed -> whole MiB (the unit of ``--mem=<n>M`` and of ``memory_mb``
    fields). ``"4G"``, ``" 4 gb "``, ``"4GiB"``, ``4``, ``"4"`` -> 4096; ``"4000M"`` -> 4000;
    ``"1.5T"`` -> 1572864; ``"512K"`` -> 1 (rounded up). Numbers (``int``, ``float``, ``Decimal``)
    are bare numbers: GB. Raises :class:`MemoryRefusal` (see the module) for anything else,
    including ``bool``, ``"1e3"``, ``"4GBs"``, ``"4.5.6"``, ``"1P"``, NaN and infinities."""
    if isinstance(value, bool):
        raise MemoryRefusal("invalid", "Memory must be an amount such as 4G, not yes/no or true/false.")
    if not isinstance(value, str | int | float | Decimal):
        raise MemoryRefusal("invalid", "Memory must be an amount such as 4G.")
    if isinstance(value, str):
        text = value.strip()
        match = _SIZE.fullmatch(text) if len(text) <= _LONGEST else None
        if not match:
            raise MemoryRefusal("invalid", f"'{text[:_SHOWN]}' is not an amount of memory.")
        number, negative, unit = Decimal(match["number"]), bool(match["sign"]), (match["unit"] or "").upper()
    else:  # a number from YAML or JSON: bare, so GB
        if isinstance(value, int) and abs(value) > MAX_MEMORY_MIB:  # (str() of a huge int would raise)
            if value < 0:
                raise MemoryRefusal("not_positive", "Memory must be more than 0 (a negative number is not).")
            raise MemoryRefusal("too_big", _too_big("A number that large"))
        text = str(value)
        if isinstance(value, float) and not math.isfinite(value) or isinstance(value, Decimal) and not value.is_finite():
            raise MemoryRefusal("invalid", f"'{text[:_SHOWN]}' is not an amount of memory.")
        number = Decimal(text) if not isinstance(value, Decimal) else value
        number, negative, unit = abs(number), number < 0, ""
    if negative or number == 0:
        raise MemoryRefusal("not_positive", f"Memory must be more than 0 ('{text[:_SHOWN]}' is not).")
    mib = (number * _MIB_PER[unit or "G"]).to_integral_value(rounding=ROUND_CEILING)
    if mib > MAX_MEMORY_MIB:
        raise MemoryRefusal("too_big", _too_big(f"'{text[:_SHOWN]}'"))
    if not unit and number >= UNCLEAR_BARE_GB:
        raise MemoryRefusal(
            "unclear",
            f"{text} with no unit would be {text} GB: write {text}M for MiB (what Slurm's --mem means by a bare"
            f" number) or {text}G for GB.",
        )
    return int(mib)


def _too_big(what: str) -> str:
    return f"{what} is more memory than any node has: at most 64T."


def memory_text(mib: int | None) -> str:
    """MiB -> the amount as Slurm writes it (``scontrol show job``'s ``MinMemoryNode``, the TRES
    ``mem=``): the largest unit that holds it whole, ``4096`` -> ``4G``, ``4000`` -> ``4000M``,
    ``1048576`` -> ``1T``. What it writes, :func:`memory_mib` reads back to the same MiB. ``""`` for
    ``None``."""
    if mib is None:
        return ""
    mib = int(mib)
    for unit, size in (("T", 1024 * 1024), ("G", 1024)):
        if mib and mib % size == 0:
            return f"{mib // size}{unit}"
    return f"{mib}M"
