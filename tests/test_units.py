"""portal.units: the one reader of memory amounts. Every surface (both forms,
profile files and overrides, the API's session body, and so the CLI) calls it; each surface's own
test is next to that surface's tests and checks the same sentences arrive there."""

from __future__ import annotations

from decimal import Decimal

import pytest

from portal.units import ACCEPTED, MAX_MEMORY_MIB, MemoryRefusal, memory_mib, memory_text


@pytest.mark.parametrize(
    "typed, mib",
    [
        ("4G", 4096),
        ("4000M", 4000),
        ("1.5T", 1572864),
        ("4 GB", 4096),
        ("512MiB", 512),
        ("4", 4096),  # a bare number means GB
        ("4g", 4096),
        (" 4 G ", 4096),
        ("4gib", 4096),
        ("4Gb", 4096),  # binary, as Slurm's --mem: GB = GiB = 1024 MiB
        ("1TB", 1024 * 1024),
        ("2.5", 2560),
        (".5G", 512),
        ("0.1G", 103),  # rounded up to whole MiB: never less than asked
        ("512K", 1),
        ("2048K", 2),
        ("1023", 1023 * 1024),  # the largest bare number taken as GB
        ("64T", MAX_MEMORY_MIB),
        (4, 4096),  # YAML / JSON numbers are bare numbers
        (4.5, 4608),
        (Decimal("1.5"), 1536),
    ],
)
def test_amounts_people_write(typed, mib):
    assert memory_mib(typed) == mib


@pytest.mark.parametrize(
    "typed, code, sentence",
    [
        ("0", "not_positive", "Memory must be more than 0 ('0' is not)."),
        ("0G", "not_positive", "Memory must be more than 0 ('0G' is not)."),
        ("-1", "not_positive", "Memory must be more than 0 ('-1' is not)."),
        ("-4G", "not_positive", "Memory must be more than 0 ('-4G' is not)."),
        (0, "not_positive", "Memory must be more than 0 ('0' is not)."),
        (-3.5, "not_positive", "Memory must be more than 0 ('-3.5' is not)."),
        pytest.param(-(10**5000), "not_positive", "Memory must be more than 0 (a negative number is not).", id="-huge int"),
        ("1e3", "invalid", "'1e3' is not an amount of memory."),
        ("4GBs", "invalid", "'4GBs' is not an amount of memory."),
        ("4.5.6", "invalid", "'4.5.6' is not an amount of memory."),
        ("1P", "invalid", "'1P' is not an amount of memory."),
        ("4 G B", "invalid", "'4 G B' is not an amount of memory."),
        ("G", "invalid", "'G' is not an amount of memory."),
        ("", "invalid", "'' is not an amount of memory."),
        ("lots", "invalid", "'lots' is not an amount of memory."),
        ("４G", "invalid", "'４G' is not an amount of memory."),  # a full-width digit is not a digit here
        ("inf", "invalid", "'inf' is not an amount of memory."),
        (float("nan"), "invalid", "'nan' is not an amount of memory."),
        (float("inf"), "invalid", "'inf' is not an amount of memory."),
        ("4" * 300, "invalid", f"'{'4' * 24}' is not an amount of memory."),  # echoed shortened
        (True, "invalid", "Memory must be an amount such as 4G, not yes/no or true/false."),
        (None, "invalid", "Memory must be an amount such as 4G."),
        ([4], "invalid", "Memory must be an amount such as 4G."),
        ("65T", "too_big", "'65T' is more memory than any node has: at most 64T."),
        ("99999999999999999999999999T", "too_big", "'999999999999999999999999' is more memory than any node has"),
        ("100000", "too_big", "'100000' is more memory than any node has: at most 64T."),
        (1e20, "too_big", "'1e+20' is more memory than any node has: at most 64T."),
        pytest.param(10**5000, "too_big", "A number that large is more memory than any node has: at most 64T.", id="huge int"),
        (
            "2048",
            "unclear",
            "2048 with no unit would be 2048 GB: write 2048M for MiB (what Slurm's --mem means by a bare number) or 2048G for GB.",
        ),
        ("1024", "unclear", "1024 with no unit would be 1024 GB: write 1024M for MiB"),
        (4000, "unclear", "4000 with no unit would be 4000 GB: write 4000M for MiB"),
    ],
)
def test_refusals_say_what_was_wrong_and_which_units_are_accepted(typed, code, sentence):
    with pytest.raises(MemoryRefusal) as refused:
        memory_mib(typed)
    assert refused.value.code == code
    assert str(refused.value).startswith(sentence) and str(refused.value).endswith(ACCEPTED), str(refused.value)


def test_a_refusal_is_a_value_error():
    """pydantic (the profile schema) turns a ValueError from a validator into the field's error."""
    with pytest.raises(ValueError, match="a bare number means GB"):
        memory_mib("x")


@pytest.mark.parametrize(
    "mib, text", [(4096, "4G"), (4000, "4000M"), (1536, "1536M"), (1024 * 1024, "1T"), (1, "1M"), (None, "")]
)
def test_written_as_slurm_writes_it_and_read_back_the_same(mib, text):
    assert memory_text(mib) == text
    if mib:
        assert memory_mib(text) == mib
