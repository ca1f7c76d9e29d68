"""The node's certificate authority, each component's certificate, and the kubeconfigs.

One CA signs everything: the API server's and the kubelet's serving certificates (with the
addresses clients dial), and one client certificate per identity the API server authorizes
(RBAC and the Node authorizer know them by common name and organization, as kubeadm names
them). The service-account signing key is a key pair of its own. Files are made once and
kept under ``.run/node/pki``, so a restarted node keeps its identities.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from deploy.node.settings import NodeSettings

_VALID_FOR = datetime.timedelta(days=365)


@dataclass(frozen=True)
class Identity:
    """A client of the API server: the user (CN) and groups (O) its certificate names."""

    file: str
    user: str
    groups: tuple[str, ...] = ()


def client_identities(settings: NodeSettings) -> list[Identity]:
    return [
        Identity("admin", "kubernetes-admin", ("system:masters",)),
        Identity("controller-manager", "system:kube-controller-manager"),
        Identity("scheduler", "system:kube-scheduler"),
        Identity("kubelet", f"system:node:{settings.name}", ("system:nodes",)),
        Identity("kube-proxy", "system:kube-proxy"),
        Identity("coredns", "system:coredns"),
        Identity("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)),
    ]


def pki_dir(settings: NodeSettings) -> Path:
    return settings.run_dir / "pki"


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(path: Path, key: rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


def _load_key(path: Path) -> rsa.RSAPrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return key


def _name(common: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    return x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in orgs] + [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    )


def _ca(folder: Path) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    cert_path, key_path = folder / "ca.crt", folder / "ca.key"
    if cert_path.exists() and key_path.exists():
        return x509.load_pem_x509_certificate(cert_path.read_bytes()), _load_key(key_path)
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("lakehouse-node-ca"))
        .issuer_name(_name("lakehouse-node-ca"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + 10 * _VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )  # digital signature, cert sign, CRL sign
        .sign(key, hashes.SHA256())
    )
    _write_key(key_path, key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


#: a certificate closer than this to its end is issued again at the next ``up``
_RENEW_BEFORE = datetime.timedelta(days=30)


def _current(folder: Path, stem: str, subject: x509.Name, names: list[x509.GeneralName]) -> bool:
    crt, key = folder / f"{stem}.crt", folder / f"{stem}.key"
    if not (crt.exists() and key.exists()):
        return False
    cert = x509.load_pem_x509_certificate(crt.read_bytes())
    try:
        held = list(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        held = []
    fresh = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > _RENEW_BEFORE
    return fresh and cert.subject == subject and sorted(map(repr, held)) == sorted(map(repr, names))


def _issue(
    folder: Path,
    stem: str,
    ca: tuple[x509.Certificate, rsa.RSAPrivateKey],
    subject: x509.Name,
    usage: list[x509.ObjectIdentifier],
    names: list[x509.GeneralName] | None = None,
) -> None:
    """``<stem>.crt`` and ``<stem>.key`` signed by the CA, unless both exist for this subject and these names and
    stay valid a while yet (a changed node address or name reissues what names it)."""
    if _current(folder, stem, subject, names or []):
        return
    ca_cert, ca_key = ca
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, True, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    _write_key(folder / f"{stem}.key", key)
    (folder / f"{stem}.crt").write_bytes(builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))


def kubeconfig(settings: NodeSettings, identity: str, server: str | None = None) -> dict:
    """A kubeconfig that presents ``identity``'s certificate to the node's API server."""
    folder = pki_dir(settings)

    def data(name: str) -> str:
        return base64.b64encode((folder / name).read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": settings.name,
                "cluster": {
                    "server": server or f"https://{settings.node_ip}:6443",
                    "certificate-authority-data": data("ca.crt"),
                },
            }
        ],
        "users": [
            {
                "name": identity,
                "user": {"client-certificate-data": data(f"{identity}.crt"), "client-key-data": data(f"{identity}.key")},
            }
        ],
        "contexts": [{"name": settings.name, "context": {"cluster": settings.name, "user": identity}}],
        "current-context": settings.name,
    }


def ensure_pki(settings: NodeSettings) -> Path:
    """Make whatever certificate, key or kubeconfig is missing; returns the folder."""
    folder = pki_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    ca = _ca(folder)
    domain = settings.cluster_domain
    _issue(
        folder, "apiserver", ca, _name("kube-apiserver"), [ExtendedKeyUsageOID.SERVER_AUTH],
        [x509.DNSName(n) for n in ("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                   f"kubernetes.default.svc.{domain}", "localhost", settings.name)]
        + [x509.IPAddress(ip) for ip in (settings.node_ip, settings.api_service_ip, ipaddress.IPv4Address("127.0.0.1"))],
    )  # fmt: skip
    _issue(
        folder, "kubelet-serving", ca, _name(f"system:node:{settings.name}", ("system:nodes",)),
        [ExtendedKeyUsageOID.SERVER_AUTH], [x509.DNSName(settings.name), x509.IPAddress(settings.node_ip)],
    )  # fmt: skip
    for identity in client_identities(settings):
        _issue(folder, identity.file, ca, _name(identity.user, identity.groups), [ExtendedKeyUsageOID.CLIENT_AUTH])
    if not (folder / "sa.key").exists():
        key = _new_key()
        _write_key(folder / "sa.key", key)
        (folder / "sa.pub").write_bytes(
            key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
    for identity in client_identities(settings):
        path, text = folder / f"{identity.file}.kubeconfig", yaml.safe_dump(kubeconfig(settings, identity.file))
        if not path.exists() or path.read_text() != text:  # the API server's address is in it
            path.write_text(text)
            path.chmod(0o600)
    return folder
