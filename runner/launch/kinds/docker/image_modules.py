"""Whether a trial image has the Python modules the study's engines require, asked before the first trial.

The process launcher asks an engine's interpreter (:mod:`runner.launch.kinds.process.interpreter`); a container
launcher asks the image, in a short helper container of it (the trial's user, no network, read-only root, no
capabilities): ``importlib.util.find_spec`` for each module ``Engine.requires`` names, found, not imported. An
image built before an engine joined its stack (an older ``cpu`` image without onnxruntime), or the wrong image named by
``--image``, is refused by ``isocost check`` and ``run`` before anything runs, naming the module and the fix.

Example::

    missing_in_image(client, "sha256:…", "10001:10001", {"onnxruntime"}, "cpu")   # [] or [UserError(…)]
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable
from typing import Any

from protocol.engines import engine_named
from protocol.errors import UserError
from runner.launch.daemon.client import docker_sdk, short_error
from runner.launch.kinds.process.interpreter import FIND_MODULES


def missing_in_image(client: Any, image: str, user: str, engines: Iterable[str], stack: str,
                     scenario: tuple[str, tuple[str, ...]] = ("", ())) -> list[UserError]:
    """One error per engine whose module(s) the image lacks, and one for the ``scenario``'s (its name and modules:
    a server study's MLPerf LoadGen); [] when every one is found or none is required."""
    needs = {f"engine {name}": engine_named(name).requires for name in sorted(set(engines))}
    if scenario[1]:
        needs[f"scenario {scenario[0]}"] = scenario[1]
    modules = sorted({module for required in needs.values() for module in required})
    if not modules:
        return []
    where = f"--launcher docker, image {image}"
    docker = docker_sdk()
    helper = None
    try:
        helper = client.containers.create(
            image=image, name=f"isocost-engine-modules-{uuid.uuid4().hex[:8]}", entrypoint=["python3"],
            command=["-c", FIND_MODULES, *modules], user=user or None, network_mode="none", read_only=True,
            cap_drop=["ALL"], security_opt=["no-new-privileges"], pids_limit=16, detach=True,
            labels={"org.isocost.kind": "engine-modules"})
        helper.start()
        code = int(helper.wait(timeout=120).get("StatusCode", -1))
        missing = set(helper.logs(stdout=True, stderr=False).decode("utf-8", "replace").split())
    except docker.errors.DockerException as exc:
        return [UserError(f"the image could not be asked for the engines' modules: {short_error(exc)}", where,
                          "Check that the image runs (docker run --rm IMAGE --help).")]
    finally:
        if helper is not None:
            with contextlib.suppress(Exception):  # best effort: the helper is labelled for later cleanup
                helper.remove(force=True)
    if code != 0:
        missing = set(modules)
    return [UserError(f"{name} needs the Python module(s) {', '.join(sorted(set(required) & missing))}, "
                      f"which image {image} lacks", where,
                      f"Rebuild the {stack} image (isocost images build --stack {stack}) or name one that has them, "
                      "or drop it from the study.")
            for name, required in needs.items() if set(required) & missing]
