"""`python -m deploy.node COMMAND`: the one-node cluster (`make up-node`, `make down-node`)."""

from __future__ import annotations

import argparse
import os
import sys

from deploy.node import binaries, cluster, images, namespaces, usage
from deploy.node.settings import NodeSettings
from lakehouse.errors import LakehouseError

# The images the manifests name that the node replaces with a stand-in (images.STANDINS).
MANIFEST_IMAGES = {
    "postgres": "postgres",
    "mysql": "mysql",
    "minio": "quay.io/minio/minio",
    "trino": "trinodb/trino",
    "prometheus": "prom/prometheus",
    "kafka": "kafka-standin",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deploy.node",
        description="A one-node Kubernetes cluster inside a network and a mount namespace of its own (root).",
        epilog="Commands for the cluster run inside its namespaces: `python -m deploy.node kubectl get pods -A`, "
        "`python -m deploy.node exec -- helm list -A` (KUBECONFIG and the node's Docker engine set).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="build what is missing (once), start every component, wait until the node is Ready")
    sub.add_parser("down", help="stop every process the node started and remove its namespaces (data kept)")
    sub.add_parser("status", help="each component's pid and memory")
    for name, text in (
        ("kubectl", "kubectl against the node, as its admin"),
        ("exec", "any command inside the node's namespaces, with KUBECONFIG, DOCKER_HOST and the node's tools on PATH"),
    ):
        sub.add_parser(name, help=text).add_argument("args", nargs=argparse.REMAINDER)
    sub.add_parser("load", help="hand images from the node's Docker engine to its containerd").add_argument("images", nargs="+")
    sub.add_parser("build-args", help="the `docker build` flags that put a Dockerfile on the stand-in bases").add_argument(
        "dockerfile", choices=["lakehouse", "operator"]
    )
    sub.add_parser("standins", help="build and load every stand-in image; print the kustomize images they replace")
    sub.add_parser("chart", help="the folder of spark-operator's Helm chart, from its Go module")
    sub.add_parser("name", help="the node's name, its kubeconfig context's too")
    sub.add_parser("usage", help="each running pod's peak and current memory against its request and limit (MiB)")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["kubectl"], ["exec"]):  # everything after the command is the command's own
        args = argparse.Namespace(command=argv[0], args=argv[1:])
    else:
        args = parser.parse_args(argv)
    settings = NodeSettings()
    if args.command == "name":
        print(settings.name)
        return 0
    if os.geteuid() != 0:
        print("error: the node needs root (it creates network and mount namespaces and runs containerd)", file=sys.stderr)
        return 2
    say = print if args.command in ("up", "down") else (lambda text: print(text, file=sys.stderr))
    try:
        if args.command == "up":
            seconds = cluster.up(settings, say)
            print(f"node {settings.name} Ready in {seconds:.0f} s; kubectl: python -m deploy.node kubectl get pods -A")
        elif args.command == "down":
            cluster.down(settings, say)
            print(f"node {settings.name} stopped; its data stays in {settings.run_dir}")
        elif args.command == "status":
            for name, state in cluster.status(settings):
                print(f"  {name:<24} {state}")
        elif args.command == "load":
            for image in args.images:
                images.load(settings, image, say)
        elif args.command == "build-args":
            chosen = (images.base_image_args if args.dockerfile == "lakehouse" else images.operator_image_args)(settings, say)
            print("\n".join(["--network=host", *[f"--build-arg={key}={value}" for key, value in chosen.items()]]))
        elif args.command == "standins":
            for name, replaced in MANIFEST_IMAGES.items():
                image = images.standin_image(settings, name, say)
                images.load(settings, image, say)
                new_name, new_tag = image.rsplit(":", 1)
                print(f"  - {{name: {replaced}, newName: {new_name}, newTag: '{new_tag}'}}")
        elif args.command == "usage":
            print(usage.table(usage.pods_usage(settings)))
        elif args.command == "chart":
            print(binaries.module_folder("spark-operator", "charts/spark-operator-chart"))
        else:
            command = args.args[1:] if args.args[:1] == ["--"] else args.args
            if args.command == "kubectl":
                command = ["kubectl", *command]
            env = {
                **os.environ,
                **images.docker_env(settings),
                "KUBECONFIG": str(settings.admin_kubeconfig),
                "PATH": f"{settings.bin_dir}:{os.environ.get('PATH', '')}",
            }
            os.execvpe("nsenter", namespaces.enter(settings) + command, env)
    except LakehouseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
