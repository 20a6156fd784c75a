"""GPU usage measured, not assumed: the ground floor that reads dcgm-exporter's series
from Prometheus. Imports no app; the poller (jobs) reads once per interval through it, pages read
what it stored (:mod:`gpuusage.store`)."""

from .prometheus import PrometheusError, Sample, prometheus_configured, query, query_range

__all__ = ["PrometheusError", "Sample", "prometheus_configured", "query", "query_range"]
