# Prometheus 2.55.1 on the one-node cluster, the real thing built from its Go module (v0.55.1) on the
# Go module proxy: the binary where prom/prometheus has it, its entrypoint, user nobody. The web UI's
# assets are not in the module (its API, scraping and rules are).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY prometheus /bin/prometheus
RUN mkdir -p /prometheus && chown 65534:65534 /prometheus
USER 65534
WORKDIR /prometheus
ENTRYPOINT ["/bin/prometheus"]
