"""`python -m deploy.node up|down|status|kubectl ...`: the one-node cluster (make up-node / down-node)."""

from __future__ import annotations

import argparse
import os
import sys

from deploy.node import cluster, namespaces
from deploy.node.settings import NodeSettings
from lakehouse.errors import LakehouseError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deploy.node",
        description="A one-node Kubernetes cluster inside a network namespace of its own (root needed).",
        epilog="Commands for the cluster run inside its namespace: `python -m deploy.node kubectl get pods -A`, "
        "or `python -m deploy.node exec -- helm list -A` (KUBECONFIG set).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="build what is missing (once), start every component, wait until the node is Ready")
    sub.add_parser("down", help="stop every process the node started and remove its namespaces (data kept)")
    sub.add_parser("status", help="each component's pid and memory")
    run_kubectl = sub.add_parser("kubectl", help="kubectl against the node, as its admin")
    run_kubectl.add_argument("args", nargs=argparse.REMAINDER)
    run = sub.add_parser("exec", help="any command inside the node's namespaces, KUBECONFIG set to its admin")
    run.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    settings = NodeSettings()
    if os.geteuid() != 0:
        print("error: the node needs root (it creates network and mount namespaces and runs containerd)", file=sys.stderr)
        return 2
    try:
        if args.command == "up":
            seconds = cluster.up(settings)
            print(f"node {settings.name} Ready in {seconds:.0f} s; kubectl: python -m deploy.node kubectl get pods -A")
        elif args.command == "down":
            cluster.down(settings)
            print(f"node {settings.name} stopped; its data stays in {settings.run_dir}")
        elif args.command == "status":
            for name, state in cluster.status(settings):
                print(f"  {name:<24} {state}")
        else:
            command = args.args[1:] if args.args[:1] == ["--"] else args.args
            if args.command == "kubectl":
                command = ["kubectl", *command]
            env = {**os.environ, "KUBECONFIG": str(settings.admin_kubeconfig)}
            os.execvpe("nsenter", namespaces.enter(settings) + command, env)
    except LakehouseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
