"""Start, watch and stop the instances of one run as Ray actors (``Runtime(..., backend="ray")``).

Ray does placement and lifecycle only: which node (and which GPUs) each
instance gets, and telling the parent when an actor is gone. Requests never go
through Ray; the actors speak omni's own data plane (see :mod:`.actor`).

Before anything starts, every request is checked against what the cluster
offers (a custom resource no node has, GPUs on a GPU-less cluster), and all
the problems are reported at once instead of leaving an actor pending forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from omni_compiler.topology import CompiledTopology

from ..errors import StartupError
from ..launch.backend import all_exited
from ..launch.spec import WorkerLaunch
from .placement import ActorRequest, RayPlan, plan

STARTING = "starting"
NAMESPACE = "omni"
"""Ray namespace of every omni actor (``ray list actors --filter namespace=omni``)."""
_LOOPBACK = {"RAY_USAGE_STATS_ENABLED": "0"}


@dataclass
class RayWorker:
    """One instance's actor, as the runtime sees it (the fields a spawned worker has too)."""

    name: str
    actor: Any
    pid: int | None = None
    state: str = STARTING
    exited: asyncio.Future[int] = field(default=None)  # type: ignore[assignment]
    reason: str = ""
    """Why the actor ended, in words (``its Ray actor died: node removed``)."""
    node: dict[str, Any] = field(default_factory=dict)


def actor_name(run_id: str, instance: str) -> str:
    return f"omni:{run_id}:{instance}"


CONNECT_TIMEOUT_S = 10.0
"""How long ``--ray-address HOST:PORT`` may take to answer before the run gives up (Ray itself retries for minutes)."""


class RayConnectError(Exception):
    """No Ray cluster answers at the address the user gave: one line naming it and the fix (exit 1)."""

    exit_code = 1

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(
            f"error: --ray-address {address}: no Ray cluster answers there ({reason})\n"
            "  fix:  start one first (ray start --head, see the README's Ray section), pass its GCS address HOST:6379, "
            "or leave out --ray-address to start a private one-node Ray"
        )


class RayAuthError(RayConnectError):
    """The cluster answers but refuses this process's token (Ray 2.60's token authentication): one line and the fix."""

    def __init__(self, address: str) -> None:
        Exception.__init__(
            self,
            f"error: --ray-address {address}: the Ray cluster there refused this process's authentication token "
            f"(RAY_AUTH_MODE={os.environ.get('RAY_AUTH_MODE', 'unset')})\n"
            "  fix:  export RAY_AUTH_MODE=token and the cluster's token where omni runs: RAY_AUTH_TOKEN=<token>, "
            "or ~/.ray/auth_token copied from the head (ray get-auth-token prints it there)",
        )


def _authenticated_or_raise(address: str) -> None:
    """One GCS call before ``ray.init``: a refused token is one error line at once (``ray.init`` would
    retry for seconds, logging every try, then report that nothing answers)."""
    if address == "auto" or "://" in address:
        return
    try:
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError:  # another Ray: ray.init judges
        return
    try:
        GcsClient(address=address).internal_kv_get(b"omni-auth-probe", None, timeout=CONNECT_TIMEOUT_S)
    except AuthenticationError:
        raise RayAuthError(address) from None
    except Exception:  # anything else: ray.init says what is wrong
        return


def _reachable_or_raise(address: str) -> None:
    """A TCP connect to HOST:PORT within :data:`CONNECT_TIMEOUT_S`; ``auto`` and ``ray://`` are left to Ray."""
    import socket

    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RayConnectError(address, "not HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise RayConnectError(address, exc.strerror or type(exc).__name__) from None


def connect(address: str | None) -> bool:
    """Connect to the cluster at ``address`` (``auto`` included), or start a local Ray; True when we started it.

    A driver that is already connected (``ray.init`` called by the program) is reused as is.
    """
    for key, value in _LOOPBACK.items():
        os.environ.setdefault(key, value)
    if not address:  # a private one-node Ray: every address on loopback (read by Ray when it is first imported)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if ray.is_initialized():
        return False
    if address:
        _reachable_or_raise(address)
        _authenticated_or_raise(address)
        try:
            ray.init(address=address, namespace=NAMESPACE, logging_level="WARNING")
        except (ConnectionError, RuntimeError, ValueError) as exc:  # Ray's words, on one line, not its traceback
            raise RayConnectError(address, str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from None
        return False
    ray.init(namespace=NAMESPACE, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level="WARNING", object_store_memory=200 << 20)
    return True


def parent_node() -> dict[str, str]:
    import ray

    return {"id": ray.get_runtime_context().get_node_id(), "host": ray.util.get_node_ip_address()}


def infeasible(ray_plan: RayPlan, nodes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(instance, why)`` for every request no alive node can satisfy (resources only; label selectors are Ray's to judge)."""
    alive = [n for n in nodes if n.get("Alive", n.get("alive", False))]
    offered = sorted({key for n in alive for key in n.get("Resources", {}) if not key.startswith("node:") and "_group_" not in key})
    problems = []
    for request in ray_plan.actors:
        wanted = dict(request.resources)
        if request.num_gpus:
            wanted["GPU"] = request.num_gpus
        if not wanted:
            continue
        if not any(all(n.get("Resources", {}).get(k, 0.0) >= v for k, v in wanted.items()) for n in alive):
            missing = ", ".join(f"{k}: {v:g}" for k, v in wanted.items())
            fix = "start the program with --device cpu, or add GPU nodes" if "GPU" in wanted and not request.resources else (
                "start a node offering it (ray start --resources '{...}') or change processes.<process>.ray.resources"
            )
            problems.append((request.instance, f"instance {request.instance} needs {{{missing}}} on one node; no alive node offers that (the cluster offers: {', '.join(offered)}); {fix}"))
    flagged = {name for name, _why in problems}
    for key in sorted({k for request in ray_plan.actors for k in request.resources}):
        # a custom resource is a count each instance holds while it runs: together they must fit what the nodes offer
        takers = [r for r in ray_plan.actors if r.resources.get(key) and r.instance not in flagged]
        wanted = sum(r.resources[key] for r in takers)
        total = sum(n.get("Resources", {}).get(key, 0.0) for n in alive)
        if len(takers) > 1 and total and wanted > total:
            names = ", ".join(r.instance for r in takers)
            problems.append((takers[-1].instance, f"instances {names} need {key}: {wanted:g} together, the cluster offers {total:g} "
                                                  f"(each instance holds its units while it runs); start the nodes with more "
                                                  f"(ray start --resources '{{\"{key}\": {int(-(-wanted // 1))}}}') or ask for less"))
    return problems


class RayLauncher:
    """The Ray counterpart of the local spawn launcher (same ``workers`` / ``alive`` / ``kill_all`` surface)."""

    def __init__(
        self,
        topology: CompiledTopology,
        run_json: str,
        options: Any,
        on_exit: Callable[[Any], None],
        run_id: str,
        address: str | None = None,
    ) -> None:
        self.topology = topology
        self.run_json = run_json
        self.options = options
        self.on_exit = on_exit
        self.run_id = run_id
        self.address = address
        self.plan = plan(topology, cpu_only=options.device == "cpu")
        self.workers: dict[str, RayWorker] = {}
        self._groups: dict[str, Any] = {}
        self._tp_ports: dict[str, Any] = {}
        """TP group -> the port its rank 0's actor picked (an ObjectRef Ray resolves for every rank's ``serve``)."""
        self._owns_ray = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._actor_class: Any = None

    # -- start ---------------------------------------------------------------------------------
    async def connect(self, timeout: float) -> dict[str, str]:
        """Join (or start) Ray, check the plan against the cluster and reserve the TP placement groups.

        Returns the parent's node (id and address). Raises :class:`StartupError` naming every
        request the cluster cannot satisfy.
        """
        import ray
        from ray.util.placement_group import placement_group

        self._loop = asyncio.get_running_loop()
        self._owns_ray = await self._loop.run_in_executor(None, connect, self.address)
        problems = infeasible(self.plan, ray.nodes())
        if problems:
            names = ", ".join(name for name, _why in problems)
            raise StartupError(None, names, "", reason="Ray cannot place it:\n  " + "\n  ".join(why for _name, why in problems))
        for group in self.plan.groups:
            selectors = [dict(group.label_selector) for _ in group.bundles] if group.label_selector else None
            pg = placement_group([dict(b) for b in group.bundles], strategy="STRICT_PACK", name=f"omni:{self.run_id}:{group.key}", bundle_label_selector=selectors)
            self._groups[group.key] = pg
        for key, pg in self._groups.items():
            try:
                await asyncio.wait_for(asyncio.wrap_future(pg.ready().future()), timeout)
            except asyncio.TimeoutError:
                bundles = [b for g in self.plan.groups if g.key == key for b in g.bundles]
                raise StartupError(None, key, "", reason=(
                    f"Ray could not reserve the TP ranks of {key} on one node (STRICT_PACK, bundles {bundles}) within {timeout:g} s; "
                    "a node needs all of them at once"
                )) from None
        self._actor_class = ray.remote(_actor_class())
        return parent_node()

    def respawn(self, launch: WorkerLaunch) -> RayWorker:
        """A fresh actor for ``launch.instance`` (same request; Ray picks any node that satisfies it)."""
        return self._spawn(self.plan.actor(launch.instance), launch)

    async def respawn_async(self, launch: WorkerLaunch, timeout: float = 60.0) -> RayWorker:
        """:meth:`respawn`, waiting (without blocking the loop) while Ray still holds the dead actor's name.

        After a node is lost, the owner learns of its actor's death before the GCS
        marks the actor dead and frees its name; the restart waits for that.
        """
        import ray

        name = launch.instance
        old = self.workers.get(name)
        if old is not None:  # a lost node's actor can stay registered (and hold its name) until it is killed
            with contextlib.suppress(Exception):
                ray.kill(old.actor, no_restart=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.respawn(launch)
            except Exception as exc:  # ActorAlreadyExistsError (a ValueError in older Ray)
                if "already taken" not in str(exc) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.2)

    def _spawn(self, request: ActorRequest, launch: WorkerLaunch) -> RayWorker:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        assert self._loop is not None
        options: dict[str, Any] = {
            "name": actor_name(self.run_id, request.instance),
            "namespace": NAMESPACE,
            "num_cpus": request.num_cpus,
            "num_gpus": request.num_gpus,
            "max_concurrency": 4,
            "max_restarts": 0,
        }
        if request.resources:
            options["resources"] = dict(request.resources)
        if request.group is not None:
            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(self._groups[request.group], placement_group_bundle_index=request.bundle_index)
        elif request.label_selector:
            options["label_selector"] = dict(request.label_selector)
        actor = self._create(options)
        worker = RayWorker(request.instance, actor, exited=self._loop.create_future())
        self.workers[request.instance] = worker
        # the same launch JSON a local worker reads on its stdin; the run as this cluster sees it
        # (the parent's endpoint), and no parent pid: Ray ends an actor whose owner died
        tp = launch.run.get("tp")
        run = json.loads(self.run_json)
        if tp is not None:  # a TP rank: the group meets on rank 0's node, at a port free there
            run["tp"] = tp
            if tp["rank"] == 0:
                self._tp_ports[tp["group"]] = actor.free_port.remote()
        port = self._tp_ports.get(tp["group"]) if tp is not None else None
        placed = dataclasses.replace(launch, run=run, parent_pid=None)
        ref = actor.serve.remote(placed.to_json(), port)
        asyncio.wrap_future(ref.future(), loop=self._loop).add_done_callback(lambda fut: self._ended(worker, fut))
        asyncio.wrap_future(actor.node.remote().future(), loop=self._loop).add_done_callback(lambda fut: self._placed(worker, fut))
        return worker

    def _create(self, options: dict[str, Any]) -> Any:
        return self._actor_class.options(**options).remote()

    def _placed(self, worker: RayWorker, fut: asyncio.Future[Any]) -> None:
        if not fut.cancelled() and fut.exception() is None:
            worker.node = fut.result()
            worker.pid = worker.node.get("pid")

    def _ended(self, worker: RayWorker, fut: asyncio.Future[Any]) -> None:
        if worker.exited.done():
            return
        if fut.cancelled():
            code, reason = -9, "its Ray actor was cancelled"
        elif fut.exception() is not None:
            code, reason = -9, f"its Ray actor died ({_first_line(fut.exception())})"
        else:
            code, reason = 0, "stopped"
        worker.reason = reason
        worker.exited.set_result(code)
        self.on_exit(worker)

    # -- views ---------------------------------------------------------------------------------
    async def placements(self) -> dict[str, dict[str, Any]]:
        """Node, address and devices of every live instance (asks each actor)."""
        names = [w.name for w in self.alive()]
        refs = [self.workers[n].actor.node.remote() for n in names]
        results = await asyncio.gather(*(asyncio.wrap_future(r.future()) for r in refs), return_exceptions=True)
        return {n: r for n, r in zip(names, results) if isinstance(r, dict)}

    async def transport_bytes(self) -> dict[str, dict[str, dict[str, int]]]:
        """Bytes sent per instance, peer and transport."""
        names = [w.name for w in self.alive()]
        refs = [self.workers[n].actor.transport_bytes.remote() for n in names]
        results = await asyncio.gather(*(asyncio.wrap_future(r.future()) for r in refs), return_exceptions=True)
        return {n: r for n, r in zip(names, results) if isinstance(r, dict)}

    # -- stop ----------------------------------------------------------------------------------
    def alive(self) -> list[RayWorker]:
        return [w for w in self.workers.values() if not w.exited.done()]

    async def wait_exited(self, timeout: float) -> bool:
        return await all_exited([w.exited for w in self.alive()], timeout)

    async def kill_all(self, timeout: float = 5.0) -> None:
        """Kill every actor (a stopped worker's actor too: its process outlives ``serve``) and wait until Ray reports each gone."""
        import ray

        for worker in self.workers.values():
            with contextlib.suppress(Exception):
                ray.kill(worker.actor, no_restart=True)
        await self.wait_exited(timeout)
        names = [actor_name(self.run_id, name) for name in self.workers]
        assert self._loop is not None
        await self._loop.run_in_executor(None, _wait_names_released, names, timeout)

    def kill_all_sync(self) -> None:
        import ray

        if not ray.is_initialized():
            return
        for worker in self.workers.values():
            with contextlib.suppress(Exception):
                ray.kill(worker.actor, no_restart=True)

    def close(self) -> None:
        """Free the placement groups and, when this launcher started Ray, stop it."""
        import ray
        from ray.util.placement_group import remove_placement_group

        if not ray.is_initialized():
            return
        for pg in self._groups.values():
            with contextlib.suppress(Exception):
                remove_placement_group(pg)
        self._groups.clear()
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False


def _wait_names_released(names: list[str], timeout: float) -> None:
    """Return once no actor of ``names`` is alive (Ray frees a killed actor's name asynchronously)."""
    import ray

    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending and time.monotonic() < deadline:
        still = []
        for name in pending:
            try:
                ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:
                continue
            still.append(name)
        pending = still
        if pending:
            time.sleep(0.05)


def _actor_class() -> type:
    from .actor import WorkerActor

    return WorkerActor


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
