"""``ray start`` for a test head on a busy machine: its raylet told every agent port up front, and given as long as it
needs to register with the GCS.

- The raylet learns three of its agents' ports on its command line, and the dashboard agent's listen port only from a
  file the agent writes once it has imported all its modules; the raylet waits a hard-coded 15 s for that file, then
  aborts (``NodeManager::WaitForDashboardAgentPorts``). Beside a test suite and two busy processes the agent takes
  longer. The port is ours (``RayCluster`` chooses it), so the file is written before the raylet starts, as the
  agent writes it: the raylet goes on, and the agent rewrites the same port when it is up.
- ``ray start`` then waits a fixed 30 s for the raylet to register (a local in ``ray._private.node.Node``). Ray reads
  the node through ``ray._private.services.get_node`` on each try, so waiting inside it lifts that limit (up to
  ``REGISTER_S``) without touching anything else of Ray, and stops waiting once the raylet has died.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import ray._private.services as services
from ray._raylet import DASHBOARD_AGENT_LISTEN_PORT_NAME, persist_port  # type: ignore[attr-defined]
from ray.scripts.scripts import main

from shaberi.testing.ray import REGISTER_S

_get_node, _start_raylet = services.get_node, services.start_raylet
_raylets: list[Any] = []  # the raylets started (``ProcessInfo``): a dead one will never register


def _patient_get_node(gcs_address: str, node_id: str) -> Any:
    deadline = time.monotonic() + REGISTER_S
    while True:
        try:
            return _get_node(gcs_address, node_id)
        except RuntimeError:  # not registered yet, or the GCS did not answer in time
            if time.monotonic() > deadline or any(r.process.poll() is not None for r in _raylets):
                raise
            time.sleep(0.5)


def _told_raylet(*args: Any, **kwargs: Any) -> Any:
    given = inspect.signature(_start_raylet).bind(*args, **kwargs).arguments
    if port := given.get("dashboard_agent_listen_port"):
        persist_port(given["session_dir"], given["node_id"], DASHBOARD_AGENT_LISTEN_PORT_NAME, port)
    _raylets.append(raylet := _start_raylet(*args, **kwargs))
    return raylet


if __name__ == "__main__":
    services.get_node, services.start_raylet = _patient_get_node, _told_raylet
    main()
