"""tests/conftest.py's split of the serial tests by the cluster they change (``SERIAL_CLUSTERS``,
``serial_tier``), which make test runs as the tiers serial, serial_c2 and serial_both. File reads only."""

from __future__ import annotations

import re

from tests.conftest import REPO, SERIAL, SERIAL_CLUSTERS, serial_tier

POOL = "tests/teams/test_site_policy_integration.py::test_the_small_job_pool_admits_a_short_1_gpu_job_and_keeps_big_ones_out"


def test_a_module_listed_for_one_cluster_goes_to_that_clusters_tier():
    assert serial_tier("tests/fault/test_accounting_outage.py", "tests/fault/test_accounting_outage.py::test_x") == "serial"
    rate = "tests/cluster/test_rate_limit_integration.py"
    assert serial_tier(rate, f"{rate}::test_x") == "serial_c2"
    sync = "tests/teams/test_slurm_sync_integration.py"
    assert serial_tier(sync, f"{sync}::test_x") == "serial_both"


def test_a_test_parametrized_over_the_clusters_goes_by_its_id_and_an_id_naming_neither_runs_alone():
    page = "tests/cluster/test_cluster_page_integration.py"
    assert serial_tier(page, f"{page}::test_x", "cluster1") == "serial"
    assert serial_tier(page, f"{page}::test_x", "cluster2") == "serial_c2"
    assert serial_tier(page, f"{page}::test_x", "cluster3") == "serial_both"
    assert serial_tier(page, f"{page}::test_x") == "serial_both"


def test_the_longest_key_decides_a_test_listed_apart_from_its_module():
    module = POOL.split("::")[0]
    assert serial_tier(module, f"{module}::test_a_pending_jobs_cap", "") == "serial"  # the module: cluster1
    assert serial_tier(module, POOL, "cluster2") == "serial_c2"


def test_a_serial_test_not_listed_runs_alone():
    assert serial_tier("tests/fault/test_new_fault.py", "tests/fault/test_new_fault.py::test_x", "cluster1") == "serial_both"


def test_every_key_names_a_serial_test_that_exists():
    for key, where in SERIAL_CLUSTERS.items():
        assert where in ("cluster1", "cluster2", "both", "each"), (key, where)
        path, _, name = key.partition("::")
        assert (REPO / path).is_file(), key
        if name:
            assert re.search(rf"^def {re.escape(name)}\(", (REPO / path).read_text(), re.MULTILINE), key
        assert any(key.startswith(prefix) or key == prefix for prefix in SERIAL), f"{key} is not in SERIAL"
