"""The Kubernetes runtime: its settings profile, the manifests generated from code, validation.

Hand-written manifests live in ``k8s/`` (kustomize base + kind overlay); everything the
code already knows (endpoints, topics, scrape config, alert rules, dashboards, catalog
properties, seed SQL) is generated into ``k8s/base/generated`` by ``deploy.k8s.generate``.
"""
