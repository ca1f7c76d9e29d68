"""A one-node Kubernetes cluster on this machine, the runtime `make up-node` deploys to.

Every part is a real component built from a registry: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kubelet and kube-proxy of Kubernetes 1.32 and
CoreDNS from the Go module proxy (the wrapper modules in ``go/``), containerd, runc and the
CNI plugins from Debian. The node lives in a network namespace and a mount namespace it
creates: its addresses, routes, iptables rules and mounts stay out of the host's, and
`make down-node` stops every process it started, by pid, and removes both namespaces.

- ``settings``: the node's addresses, ranges and folders (``LAKEHOUSE_NODE__*``).
- ``binaries``: builds the Go binaries once, module sums checked.
- ``namespaces``: the network and mount namespaces, and the host's network as a fingerprint.
- ``pki``: the cluster's certificate authority, serving and client certificates, kubeconfigs.
- ``configs``: each component's configuration, rendered from the settings.
- ``cluster``: starts the components in order, waits for each, stops them.
"""
