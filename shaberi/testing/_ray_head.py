"""``ray start``, with the head's raylet given as long as it needs to register with the GCS.

``ray start`` waits a fixed 30 s for that (a local in ``ray._private.node.Node``), and the raylet registers only once
its Python agents have imported Ray: ~7 s idle on a 2-core machine, several times that beside a test suite and other
work. Ray reads the node through ``ray._private.services.get_node`` on each try, so waiting inside it lifts the limit
(up to ``REGISTER_S``) without touching anything else of Ray.
"""

from __future__ import annotations

import time
from typing import Any

import ray._private.services as services
from ray.scripts.scripts import main

from shaberi.testing.ray import REGISTER_S

_get_node = services.get_node


def _patient_get_node(gcs_address: str, node_id: str) -> Any:
    deadline = time.monotonic() + REGISTER_S
    while True:
        try:
            return _get_node(gcs_address, node_id)
        except RuntimeError:  # not registered yet, or the GCS did not answer in time
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


if __name__ == "__main__":
    services.get_node = _patient_get_node
    main()
