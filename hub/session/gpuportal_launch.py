"""``gpuportal-singleuser``: how a portal session starts its single-user server (the batch script
execs it with ``--port=0``; hub/portal_hub/spawner.py). It is ``jupyterhub-singleuser``, less one
optional import that costs most of the server's start-up:

``jsonschema`` checks the ``iri`` / ``iri-reference`` string formats with ``rfc3987_syntax`` when that
package is installed (``jupyter_events`` pulls it in with ``jsonschema[format-nongpl]``), and that
package builds an Earley parser for RFC 3987's grammar *at import*: about a second of CPU, before the
server can listen, for a check that only ``jupyter_events`` would use, on event schemas that name no
IRI format. ``jsonschema`` imports it inside ``suppress(ImportError)``, so marking it absent here
(``sys.modules[name] = None``) makes ``jsonschema`` skip those two formats, as on an install without
the package. Nothing else changes: the same ``jupyterhub.singleuser`` entry point, arguments and
environment.

This module is outside the ``gpuportal_session`` package on purpose: importing the package imports
``jupyter_server`` (and with it ``jsonschema``) before this could take effect.
"""

from __future__ import annotations

import sys

#: Optional imports a session's server does without (see the module's docstring).
SKIPPED_IMPORTS = ("rfc3987_syntax",)


def main() -> int | None:
    for name in SKIPPED_IMPORTS:
        sys.modules.setdefault(name, None)  # type: ignore[assignment]  (None: "not installed" to import)
    from jupyterhub.singleuser import main as singleuser_main

    sys.argv[0] = "jupyterhub-singleuser"
    return singleuser_main()


if __name__ == "__main__":
    sys.exit(main())
