"""Golden command lines of the three container runtimes (runtimes/): exact argv, odd paths as single elements,
and the refusals for what a runtime's option syntax would split."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from runtimes import Bind, command_line, default_binds, runtime_get

IMG = "/srv/gpuportal/images/debian12-sklearn"
BINDS = default_binds(job_dir="/home/alice/portal-jobs/j-1", home="/home/alice", env_cache="/srv/gpuportal/envs")


def test_default_binds_same_path_inside_job_dir_in_home_left_out():
    assert BINDS == [Bind("/home/alice", "/home/alice"), Bind("/srv/gpuportal/envs", "/srv/gpuportal/envs")]
    outside = default_binds(job_dir="/scratch/alice/j-1", home="/home/alice", env_cache="/srv/envs")
    assert outside == [
        Bind("/home/alice", "/home/alice"),
        Bind("/scratch/alice/j-1", "/scratch/alice/j-1"),
        Bind("/srv/envs", "/srv/envs"),
    ]
    # a sibling whose name starts like the home is not inside it
    assert Bind("/home/alice2/j", "/home/alice2/j") in default_binds(job_dir="/home/alice2/j", home="/home/alice", env_cache="/e")


def test_default_binds_refuse_relative():
    with pytest.raises(ValueError, match="home must be an absolute path"):
        default_binds(job_dir="/j", home="alice", env_cache="/e")


def test_charliecloud_golden():
    argv = runtime_get("charliecloud").exec_argv(
        IMG,
        ["python3", "-c", "import sklearn"],
        binds=BINDS,
        env={"PORTAL_JOB": "j-1", "PRICE": "$5"},
        workdir="/home/alice/portal-jobs/j-1",
    )
    assert argv == [
        "ch-run",
        "--home",
        "-b",
        "/srv/gpuportal/envs:/srv/gpuportal/envs",
        "--env-no-expand",
        "--set-env=PORTAL_JOB=j-1",
        "--set-env=PRICE=$5",
        "-c",
        "/home/alice/portal-jobs/j-1",
        IMG,
        "--",
        "python3",
        "-c",
        "import sklearn",
    ]


def test_charliecloud_minimal_and_check():
    cc = runtime_get("charliecloud")
    assert cc.exec_argv(IMG, ["cat", "/etc/os-release"]) == ["ch-run", IMG, "--", "cat", "/etc/os-release"]
    assert cc.check_argv(IMG) == ["ch-run", IMG, "--", "/bin/true"]
    # a bind that is not a /home/<user> home at the same path is a plain -b
    assert cc.exec_argv(IMG, ["true"], binds=[Bind("/home/alice", "/mnt/h")])[:3] == ["ch-run", "-b", "/home/alice:/mnt/h"]


def test_apptainer_golden():
    argv = runtime_get("apptainer").exec_argv(
        "/srv/images/a.sif",
        ["python3", "train.py"],
        binds=[*BINDS, Bind("/data/ro", "/data", read_only=True)],
        env={"PORTAL_JOB": "j-1", "LIST": "a,b"},
        workdir="/home/alice/portal-jobs/j-1",
    )
    assert argv == [
        "env",
        "APPTAINERENV_PORTAL_JOB=j-1",
        "APPTAINERENV_LIST=a,b",
        "apptainer",
        "exec",
        "--nv",
        "--bind",
        "/home/alice:/home/alice",
        "--bind",
        "/srv/gpuportal/envs:/srv/gpuportal/envs",
        "--bind",
        "/data/ro:/data:ro",
        "--pwd",
        "/home/alice/portal-jobs/j-1",
        "/srv/images/a.sif",
        "python3",
        "train.py",
    ]
    assert runtime_get("apptainer").check_argv("/srv/images/a.sif") == ["apptainer", "exec", "/srv/images/a.sif", "/bin/true"]


def test_enroot_golden():
    argv = runtime_get("enroot").exec_argv(
        "/srv/images/a.sqsh",
        ["python3", "train.py"],
        binds=[*BINDS, Bind("/data/ro", "/data", read_only=True)],
        env={"PORTAL_JOB": "j-1"},
        workdir="/home/alice/portal-jobs/j-1",
    )
    assert argv == [
        "env",
        "PORTAL_JOB=j-1",
        "srun",
        "--container-image=/srv/images/a.sqsh",
        "--container-mounts=/home/alice:/home/alice,/srv/gpuportal/envs:/srv/gpuportal/envs,/data/ro:/data:ro",
        "--container-workdir=/home/alice/portal-jobs/j-1",
        "--container-env=PORTAL_JOB",
        "python3",
        "train.py",
    ]
    assert runtime_get("enroot").exec_argv("/i.sqsh", ["true"]) == ["srun", "--container-image=/i.sqsh", "true"]
    assert runtime_get("enroot").check_argv("/i.sqsh") == ["test", "-r", "/i.sqsh"]


ODD = "/srv/my images/it's; rm -rf $HOME `x` | y & (z)\"*"


@pytest.mark.parametrize("name", ["charliecloud", "apptainer", "enroot"])
def test_metacharacters_stay_single_elements(name):
    rt = runtime_get(name)
    bind_dir = "/data/a b;$(reboot)'\""
    argv = rt.exec_argv(
        ODD, ["/bin/echo", "a;b", "$HOME", "`id`"], binds=[Bind(bind_dir, bind_dir)], env={"X": "1; rm -rf /"}, workdir="/w w"
    )
    assert argv[-4:] == ["/bin/echo", "a;b", "$HOME", "`id`"]
    assert any(ODD in a for a in argv)
    assert any(bind_dir in a for a in argv)
    # the one shell string made from it gives back exactly the same elements
    assert shlex.split(command_line(argv)) == argv


def test_command_line_through_a_real_shell(tmp_path):
    marker = tmp_path / "pwned"
    argv = ["printf", "%s\\n", f"; touch {marker}", "$(touch " + str(marker) + ")", "a b", "'q'", ""]
    done = subprocess.run(["sh", "-c", command_line(argv)], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:-1] == argv[2:]
    assert not marker.exists()
    assert command_line(["echo", "it's"]) == "echo 'it'\"'\"'s'"


@pytest.mark.parametrize(
    ("name", "bind", "message"),
    [
        ("charliecloud", Bind("/a:b", "/a:b"), "holds ':', which ch-run's mount option uses as a separator"),
        ("charliecloud", Bind("/data", "/data", read_only=True), "ch-run cannot bind /data read-only"),
        ("apptainer", Bind("/a,b", "/x"), "holds ',', which apptainer's mount option"),
        ("enroot", Bind("/x", "/a:b"), "bind target '/a:b' holds ':', which pyxis's"),
        ("apptainer", Bind("data", "/x"), "bind source must be an absolute path"),
    ],
)
def test_refusals_say_what_and_how(name, bind, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        runtime_get(name).exec_argv(IMG, ["true"], binds=[bind])


@pytest.mark.parametrize("name", ["charliecloud", "apptainer", "enroot"])
def test_refusals_common(name):
    rt = runtime_get(name)
    with pytest.raises(ValueError, match="image path must be an absolute path"):
        rt.exec_argv("-x", ["true"])
    with pytest.raises(ValueError, match="image path must be an absolute path"):
        rt.check_argv("images/x")
    with pytest.raises(ValueError, match="command to run in the container is empty"):
        rt.exec_argv(IMG, [])
    with pytest.raises(ValueError, match="'1X' is not a valid environment variable name"):
        rt.exec_argv(IMG, ["true"], env={"1X": "y"})
    with pytest.raises(ValueError, match="working directory must be an absolute path"):
        rt.exec_argv(IMG, ["true"], workdir="rel")


def test_runtime_get_unknown_names_known():
    with pytest.raises(ValueError, match="unknown container runtime 'docker': known are apptainer, charliecloud, enroot"):
        runtime_get("docker")
    assert runtime_get("charliecloud").name == "charliecloud"
