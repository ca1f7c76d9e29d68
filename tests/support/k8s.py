"""Reading the generated Kubernetes overlay in tests: its pods, and what each is given of the credentials."""

from __future__ import annotations

SECRET = "lakehouse-credentials"


def pods(docs):
    """(workload, pod spec or Spark pod, command) of every pod the overlay runs."""
    for doc in docs:
        spec, name = doc.get("spec", {}), f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] in ("SparkApplication", "ScheduledSparkApplication"):
            app = spec.get("template", spec)
            command = ["lakehouse", *app["arguments"]]
            for role in ("driver", "executor"):
                yield f"{name} {role}", {"containers": [app[role]], "volumes": app.get("volumes", [])}, command, True
        elif "template" in spec:
            pod = spec["template"]["spec"]
            for c in pod["containers"]:
                yield f"{name} {c['name']}", {**pod, "containers": [c]}, c.get("command"), \
                    c["image"].startswith("lakehouse")


def secret_given(pod) -> tuple[set[str], bool]:
    container = pod["containers"][0]
    whole = any(SECRET in str(e.get("secretRef", {}).get("name", "")) for e in container.get("envFrom", []))
    keys = {e["valueFrom"]["secretKeyRef"]["key"] for e in container.get("env", [])
            if SECRET in str(e.get("valueFrom", {}).get("secretKeyRef", {}).get("name", ""))}
    return keys, whole

