"""The profile schema: every error names its field and line; overrides; units."""

from __future__ import annotations

import pytest

from portal.refusals import Refused
from profiles.schema import parse_profile
from tests.profiles.conftest import EXAMPLE_TEXT


def errors_of(text: str, **kw) -> list[tuple[str, int | None, str]]:
    with pytest.raises(Refused) as caught:
        parse_profile(text, **kw)
    return [(p.field, p.line, p.message) for p in caught.value.problems]


def test_example_parses_with_units_resolved():
    spec = parse_profile(EXAMPLE_TEXT)
    assert (spec.name, spec.partition, spec.gpus_per_node, spec.cpus, spec.memory_mb, spec.time_limit_min) == (
        "train-digits",
        "small",
        0,
        2,
        2048,
        10,
    )
    assert spec.script == "train_digits.py" and spec.args == ("--epochs", "8")
    assert spec.environment["pip"] == ["numpy==2.2.6", "scikit-learn==1.7.2"] and spec.environment["python"] == "3.11"
    assert spec.data["version"] == 1


def test_every_error_points_at_its_field_and_line():
    text = """version: 1
name: demo
resources:
  partition: small
  gpus_per_node: two
  memory: 2Q
  cpu: 3
run:
  script: train.py
  command: echo both
environment:
  python: 3.10
  pip: [numpy, "rm -rf /"]
"""
    got = {(f, line): msg for f, line, msg in errors_of(text)}
    assert got[("resources.gpus_per_node", 5)] == "Must be a whole number."
    assert "'2Q' is not an amount of memory" in got[("resources.memory", 6)]
    assert "Unknown field" in got[("resources.cpu", 7)]
    assert "exactly one entry point" in got[("run", 8)]
    assert "in quotes" in got[("environment.python", 12)]
    assert "'rm -rf /' is not a package requirement" in got[("environment.pip", 13)]


@pytest.mark.parametrize(
    "text, field, line, words",
    [
        ("version: 2\nname: x\nresources: {partition: p}\nrun: {command: x}\n", "version", 1, "reads profile version 1"),
        ("name: x\nresources: {partition: p}\nrun: {command: x}\n", "version", None, "required"),
        ("version: 1\nname: [x\n", "", 2, "the list opened with [ on line 2 is not closed"),
        ("- just\n- a list\n", "", 1, "YAML mapping"),
        (
            "version: 1\nname: x\nresources: {partition: p, time_limit: '2:60'}\nrun: {command: x}\n",
            "resources.time_limit",
            3,
            "minutes and seconds after a colon go up to 59",
        ),
        (
            "version: 1\nname: x\nresources: {partition: p}\nrun: {command: x, args: [a]}\n",
            "run",
            4,
            "run.args go with run.script",
        ),
        (
            "version: 1\nname: x\nresources: {partition: p, nodes: 0}\nrun: {command: x}\n",
            "resources.nodes",
            3,
            "Must be at least 1.",
        ),
        (
            "version: 1\nname: x\nresources: {partition: p}\nrun: {command: x}\nenvironment: {pip: [--index-url=http://evil]}\n",
            "environment.pip",
            5,
            "not a package requirement",
        ),
        (
            "version: 1\nname: x\nresources: {partition: p}\nrun: {command: x}\nenvironment: {python: '3.x'}\n",
            "environment.python",
            5,
            "not a version",
        ),
        ("version: 1\nname: !!python/object:os.system x\n", "", 2, "The tag !!python/object:os.system is not supported"),
    ],
)
def test_refusals(text, field, line, words):
    found = errors_of(text)
    assert any(f == field and (line is None or ln == line) and words in msg for f, ln, msg in found), found


def test_a_list_item_is_refused_on_its_own_line_and_a_missing_comma_is_named():
    text = EXAMPLE_TEXT.replace(
        "  pip: [numpy==2.2.6, scikit-learn==1.7.2]\n",
        "  pip: [\n    numpy==2.2.6,\n    scikit-learn==1.7.2\n    pandas,\n    ./local\n  ]\n",
    )
    assert errors_of(text) == [
        (
            "environment.pip",
            17,
            "'scikit-learn==1.7.2 pandas' is several requirements in one item: give each its own (a comma between them inside [ ],"
            " or a '- ' line each).",
        ),
        (
            "environment.pip",
            19,
            "'./local' is not a package requirement such as numpy or numpy==2.2.6 (options, URLs and paths are not allowed"
            " here; use requirements).",
        ),
    ]


def test_limits_are_said_in_the_profiles_words():
    args = ", ".join(["a"] * 101)
    text = f"""version: 1
name: ''
resources:
  partition: small
  cpus: 0
  gpus_per_node: -1
  nodes: 65
run:
  command: echo
  args: [{args}]
"""
    got = {(f, line): msg for f, line, msg in errors_of(text)}
    assert got == {
        ("name", 2): "Must not be empty.",
        ("resources.cpus", 5): "Must be at least 1.",
        ("resources.gpus_per_node", 6): "Must be at least 0.",
        ("resources.nodes", 7): "Must be at most 64.",
        ("run.args", 10): "At most 100 items are allowed here (this list has 101).",
    }


def test_a_count_within_reason_is_left_to_the_site_policy():
    """The schema does not quote a limit of its own that the cluster does not have: 2000 CPUs pass the
    shape, and the site policy (which knows the node's CPUs) refuses them."""
    spec = parse_profile(EXAMPLE_TEXT.replace("cpus: 2", "cpus: 2000").replace("gpus_per_node: 0", "gpus_per_node: 16"))
    assert (spec.cpus, spec.gpus_per_node) == (2000, 16)
    # Past what any node has (and the job's cpus column holds): refused by the shape.
    assert errors_of(EXAMPLE_TEXT.replace("cpus: 2", "cpus: 40000")) == [("resources.cpus", 6, "Must be at most 4096.")]


@pytest.mark.parametrize(
    "text, line, words",
    [
        ('version: 1\nname: "demo\nresources: {partition: small}\n', 2, "the quoted text on line 2 is not closed: the file ends"),
        (
            "version: 1\nresources: {partition: small\nrun: {command: x}\n",
            3,
            "on line 3, inside the mapping opened with { on line 2",
        ),
        (
            "version: [1\nname: x\n",
            2,
            "inside the list opened with [ on line 1 (a comma missing between two items, or its closing ]",
        ),
        ('version: 1\nargs: [\n  "a"\n  "b"\n]\n', 4, "but got '<scalar>' on line 4, inside the list opened with [ on line 2"),
        ("version: 1\nenvironment:\n  pip: [numpy==2.2.6,\n\n", 3, "the file ends inside a list or mapping, after line 3"),
        ("version: 1\nresources:\n  partition: x\n bad: 1\n", 4, "This is not valid YAML: expected <block end>"),
    ],
)
def test_a_yaml_error_is_reported_where_the_mistake_is(text, line, words):
    [(field, at, message)] = errors_of(text)
    assert (field, at) == ("", line) and words in message, message


@pytest.mark.parametrize(
    "field, old, new",
    [
        ("gpus_per_node", "gpus_per_node: 0", "gpus_per_node: yes"),
        ("cpus", "cpus: 2", "cpus: true"),
        ("nodes", "cpus: 2", "cpus: 2\n  nodes: on"),
    ],
)
def test_booleans_are_not_counts(field, old, new):
    text = EXAMPLE_TEXT.replace(old, new)
    assert [(f, msg) for f, _, msg in errors_of(text)] == [
        (f"resources.{field}", "Must be a whole number, not yes/no or true/false.")
    ]
    assert errors_of(EXAMPLE_TEXT, overrides={"gpus": True})[0][:2] == ("resources.gpus_per_node", None)


def test_overrides_apply_and_their_errors_have_no_line():
    spec = parse_profile(EXAMPLE_TEXT, overrides={"gpus": 4, "partition": "train", "resources.cpus": 8, "time_limit": "01:00:00"})
    assert (spec.gpus_per_node, spec.partition, spec.cpus, spec.time_limit_min) == (4, "train", 8, 60)
    assert errors_of(EXAMPLE_TEXT, overrides={"gpus": "four"}) == [("resources.gpus_per_node", None, "Must be a whole number.")]
    assert errors_of(EXAMPLE_TEXT, overrides={"script": "x.py"})[0][0] == "overrides.script"


@pytest.mark.parametrize(
    "run, field, words",
    [
        ('{command: "   "}', "run.command", "run.command is blank (only blank space): write the bash command to run"),
        ('{command: " \\t\\n "}', "run.command", "run.command is blank (only blank space)"),
        ('{script: "  "}', "run.script", "run.script is blank (only blank space): name the file to run"),
    ],
)
def test_a_blank_entry_point_is_refused_on_its_line(run, field, words):
    """A command of only spaces passed (it is not empty) and ran as an empty job that completed."""
    [(found, line, message)] = errors_of(f"version: 1\nname: x\nresources: {{partition: p}}\nrun: {run}\n")
    assert (found, line) == (field, 4) and message.startswith(words), message


def test_a_blank_command_cannot_come_in_through_an_override():
    text = "version: 1\nname: x\nresources: {partition: p}\nrun: {command: hostname}\n"
    for key in ("command", "run.command"):
        assert [f for f, _, _ in errors_of(text, overrides={key: "   "})] == [f"overrides.{key}"]


def test_yaml_bombs_deep_nesting_and_huge_files_are_refused_quickly():
    # 10^8 values through aliases: refused before anything is expanded (this once took minutes).
    bomb = (
        "a: &a ["
        + ",".join(["x"] * 10)
        + "]\n"
        + "".join(f"{c}: &{c} [" + ",".join([f"*{p}"] * 10) + "]\n" for p, c in zip("abcdefg", "bcdefgh", strict=False))
    )
    assert errors_of("version: 1\n" + bomb) == [  # refused at its first anchor, before any alias
        ("", 2, "Anchors and aliases (&name, *name) are not supported in profiles; write the values out.")
    ]
    assert errors_of("version: 1\nname: " + "[" * 20000 + "]" * 20000 + "\n") == [
        ("", 2, "The profile is nested more than 10 levels deep.")
    ]
    with pytest.raises(Refused):
        parse_profile("x" * (70 * 1024))


MEMORY_FILE = """version: 1
name: demo
resources:
  partition: small
  memory: {memory}
run:
  command: echo hi
"""


@pytest.mark.parametrize(
    "written, mib",
    [("2G", 2048), ("2GB", 2048), ("2GiB", 2048), ("512M", 512), ("4000M", 4000), ("1.5T", 1572864), ('"4 G"', 4096)]
    + [("16", 16384), ("1.5", 1536), ('"8"', 8192)],  # a bare number means GB, as on the forms
)
def test_memory_in_a_file_is_read_by_the_one_reader(written, mib):
    assert parse_profile(MEMORY_FILE.format(memory=written)).memory_mb == mib


@pytest.mark.parametrize(
    "written, sentence",
    [
        # A bare number once meant MiB in profiles: such a file is refused, saying what to write.
        (
            "2048",
            "2048 with no unit would be 2048 GB: write 2048M for MiB (what Slurm's --mem means by a bare number) or 2048G for GB.",
        ),
        ("-1G", "Memory must be more than 0 ('-1G' is not)."),
        ("0", "Memory must be more than 0 ('0' is not)."),
        ("lots", "'lots' is not an amount of memory."),
        ("1e3", "'1e3' is not an amount of memory."),
        ("4GBs", "'4GBs' is not an amount of memory."),
        ("1P", "'1P' is not an amount of memory."),
        ("yes", "Memory must be an amount such as 4G, not yes/no or true/false."),
        ("[4]", "Memory must be an amount such as 4G."),
        ("99999T", "'99999T' is more memory than any node has: at most 64T."),
    ],
)
def test_memory_refused_in_a_file_with_its_line_and_the_units_accepted(written, sentence):
    [(field, line, message)] = errors_of(MEMORY_FILE.format(memory=written))
    assert (field, line) == ("resources.memory", 5)
    assert message == f"{sentence} Give memory as 4G, 4000M or 1.5T (a bare number means GB).", message


@pytest.mark.parametrize("value, mib", [("4000M", 4000), (8, 8192), (1.5, 1536), ("1.5T", 1572864)])
def test_memory_override_is_read_by_the_one_reader(value, mib):
    assert parse_profile(EXAMPLE_TEXT, overrides={"memory": value}).memory_mb == mib


def test_memory_override_refused_without_a_line():
    [(field, line, message)] = errors_of(EXAMPLE_TEXT, overrides={"memory": 4096})
    assert (field, line) == ("resources.memory", None)
    assert message.startswith("4096 with no unit would be 4096 GB: write 4096M for MiB") and message.endswith(
        "(a bare number means GB)."
    )


@pytest.mark.parametrize(
    "item, plain",
    [
        ("numpy", True),
        ("numpy==2.2.6", True),
        ("scikit-learn>=1.5,<2", True),
        ("torch[cuda]~=2.4", True),
        ("torch==2.4.0+cu121", True),
        ("numpy @ https://example.org/numpy.whl", False),  # a URL: requirements file
        ("numpy; python_version < '3.12'", False),  # a marker: requirements file
        ("--index-url=http://evil", False),
        ("./local/pkg", False),
        ("rm -rf /", False),
        ("numpy[", False),
        ("x" * 201, False),
    ],
)
def test_pip_items_are_plain_requirements(item, plain):
    """environment.pip takes requirements by name (read by packaging.requirements); the rest is refused."""
    import json

    text = f"version: 1\nname: x\nresources: {{partition: p}}\nrun: {{command: x}}\nenvironment: {{pip: [{json.dumps(item)}]}}\n"
    if plain:
        assert parse_profile(text).environment["pip"] == [item]
    else:
        assert any(f == "environment.pip" and "not a package requirement" in msg for f, _, msg in errors_of(text))


def test_requeue_is_on_by_default_and_can_be_turned_off_in_the_file_or_by_an_override():
    """Profiles, the API and the CLI offer "requeue on node failure" (Slurm's --requeue)."""
    from profiles.services import job_request_for

    base = "version: 1\nname: r\nresources:\n  partition: small\nrun:\n  command: python train.py\n"
    assert parse_profile(base).requeue is True and job_request_for(parse_profile(base)).requeue is True
    assert parse_profile(base.replace("command: python train.py", "command: python train.py\n  requeue: false")).requeue is False
    assert parse_profile(base, overrides={"requeue": "false"}).requeue is False


TIME_FILE = MEMORY_FILE.replace("  memory: {memory}", "  time_limit: {time_limit}")


@pytest.mark.parametrize(
    "written, minutes",
    # unquoted as quoted, as Slurm and the New job form read them: YAML 1.1's base-60 numbers once
    # made 30:00 thirty hours and 2:00:00 five days
    [("30:00", 30), ('"30:00"', 30), ("1:30", 2), ("2:00:00", 120), ("1-12:00", 2160), ("45", 45), ("017", 17)],
)
def test_an_unquoted_time_limit_reads_as_slurm_reads_it(written, minutes):
    assert parse_profile(TIME_FILE.format(time_limit=written)).time_limit_min == minutes


def test_a_number_too_long_to_read_is_refused_not_an_error():
    assert errors_of("version: 1\nname: demo\nresources:\n  cpus: " + "9" * 5000 + "\n") == [
        ("resources.cpus", 4, "This number has more than 4,300 digits; write a shorter one.")
    ]
    assert errors_of("version: 1\nname: 2024-02-30\n") == [
        (
            "name",
            2,
            "'2024-02-30' could not be read as a date (day is out of range for month); put it in quotes to keep it as text.",
        )
    ]


@pytest.mark.parametrize("written", ["0x10", "0b11", "1:30"])
def test_only_decimal_whole_numbers_are_numbers(written):
    """YAML 1.1 reads these as 16, 3 and 90; the forms and Slurm never would: text, refused here."""
    assert [field for field, _, _ in errors_of(MEMORY_FILE.replace("  memory: {memory}", f"  cpus: {written}"))] == [
        "resources.cpus"
    ]
