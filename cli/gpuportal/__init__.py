"""``gpuportal``: the command-line client of the GPU portal's REST API (``/api/v1``).

Submit and follow batch jobs, start notebooks, and manage job profiles from a terminal. The entry
point is :func:`gpuportal.cli.main`; :class:`gpuportal.client.Client` is the HTTP layer.
"""

__version__ = "0.1.0"
