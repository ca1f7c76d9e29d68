"""The node's certificates follow its settings: made once, kept while they fit, issued again when the node's
address changes (a kept certificate naming the old address would fail every TLS check against the new one).
Real keys and certificates in a temporary run folder; no node is started."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface

import yaml
from cryptography import x509

from deploy.node import pki
from deploy.node.settings import NodeSettings


def _serial(folder, stem: str) -> int:
    return x509.load_pem_x509_certificate((folder / f"{stem}.crt").read_bytes()).serial_number


def _addresses(folder, stem: str) -> set[IPv4Address]:
    cert = x509.load_pem_x509_certificate((folder / f"{stem}.crt").read_bytes())
    return set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.IPAddress))


def test_certificates_are_kept_while_they_fit_and_issued_again_for_a_new_address(tmp_path):
    first = NodeSettings(run_dir=tmp_path, address=IPv4Interface("10.250.0.2/24"))
    folder = pki.ensure_pki(first)
    serials = {stem: _serial(folder, stem) for stem in ("apiserver", "kubelet-serving", "admin")}
    pki.ensure_pki(first)
    assert {stem: _serial(folder, stem) for stem in serials} == serials

    moved = NodeSettings(run_dir=tmp_path, address=IPv4Interface("10.251.0.2/24"))
    pki.ensure_pki(moved)
    assert _serial(folder, "apiserver") != serials["apiserver"]
    assert _serial(folder, "kubelet-serving") != serials["kubelet-serving"]
    assert IPv4Address("10.251.0.2") in _addresses(folder, "apiserver")
    assert IPv4Address("10.250.0.2") not in _addresses(folder, "kubelet-serving")
    assert _serial(folder, "admin") == serials["admin"]  # a client certificate names no address
    admin = yaml.safe_load((folder / "admin.kubeconfig").read_text())
    assert admin["clusters"][0]["cluster"]["server"] == "https://10.251.0.2:6443"
