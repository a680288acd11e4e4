"""Plan mode for notebook 10 across nodes: a Ray cluster over several reserved GPU nodes, as steps and
the commands each node runs. Planned, not run by the lab yet: provisioning launches one server today.
Why and what is left: docs/decisions/2026-11-23-ray-serve.md
"""

from __future__ import annotations

from provisioning.config import ChameleonConfig, with_changes
from provisioning.plan import Step, _lease_step

RAY_PORT = 6379
# what the nodes must reach on each other (private network): GCS, the object manager and node manager,
# Serve's HTTP proxy, and the worker ports (Ray's defaults, pinned so a security group can name them)
PORTS = {"gcs": RAY_PORT, "object-manager": 8076, "node-manager": 8077, "serve-http": 8000,
         "workers": "10002-10100"}


def head_command(gpus: int = 2, port: int = RAY_PORT) -> str:
    return (f"ray start --head --port={port} --num-gpus={gpus} --object-manager-port=8076 "
            "--node-manager-port=8077 --min-worker-port=10002 --max-worker-port=10100 "
            "--include-dashboard=false")


def worker_command(head_address: str, gpus: int = 2, port: int = RAY_PORT) -> str:
    if not head_address or ":" in head_address:
        raise ValueError(f"head_address={head_address!r}: give the head node's private IP, without a port")
    return (f"ray start --address={head_address}:{port} --num-gpus={gpus} --object-manager-port=8076 "
            "--node-manager-port=8077 --min-worker-port=10002 --max-worker-port=10100")


def ray_cluster_plan(config: ChameleonConfig, nodes: int = 2, gpus_per_node: int = 2) -> list[Step]:
    """The steps that would make ``nodes`` reserved nodes one Ray cluster for notebook 10."""
    if nodes < 2:
        raise ValueError(f"nodes={nodes}: a cluster across nodes needs at least 2 (one node runs as today)")
    lease = with_changes(config, node_count=nodes)
    servers = [f"{config.server_name}-{i}" for i in range(nodes)]
    ports = ", ".join(f"{k} {v}" for k, v in PORTS.items())
    head = f"<private ip of {servers[0]}>"
    return [
        _lease_step(lease),
        Step("servers", f"launch {', '.join(servers)} on the lease's reservation (one per node), as the "
                        "single-node run launches one; a floating IP on the first only"),
        Step("network", f"allow between the nodes' private addresses: {ports} (TCP)"),
        Step("node-setup", "on every node: the single-node set-up (Docker, NVIDIA toolkit, the lab's "
                           "Jupyter image with ray[serve])"),
        Step("ray-head", f"on {servers[0]}, in the Jupyter container: {head_command(gpus_per_node)}"),
        *[Step("ray-worker", f"on {name}: {worker_command(head, gpus_per_node)}") for name in servers[1:]],
        Step("notebook", f"notebook 10 in {servers[0]}'s Jupyter with ray_address = 'auto' joins the cluster "
                         f"(ray.init(address='auto')); replicas with num_gpus 0.5 then spread over "
                         f"{nodes * gpus_per_node} GPUs"),
        Step("teardown", "ray stop on every node, then the single-node teardown for each server"),
    ]
