"""The capture's first login to MySQL 8.4 (the cluster's database) over plain TCP can complete.

MySQL 8.4 creates users with ``caching_sha2_password``. On a first login without TLS the
server sends its RSA public key and PyMySQL encrypts the password with it, which needs the
``cryptography`` package (``PyMySQL[rsa]``); without it the capture crash-loops in the
cluster. The local MariaDB has no such plugin, so this runs PyMySQL's own step of that
handshake against a real RSA key pair and checks the server side could read the password.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from pymysql import _auth


def test_pymysql_can_encrypt_a_password_for_caching_sha2_password_over_plain_tcp():
    server_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = server_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)
    nonce = bytes(range(1, 21))  # the server's scramble
    sent = _auth.sha2_rsa_encrypt(b"cdc-password", nonce, public_pem)
    seen = server_key.decrypt(sent, padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()),
                                                 algorithm=hashes.SHA1(), label=None))
    # the server undoes the scramble: password + NUL, XORed with the nonce
    plain = bytes(b ^ nonce[i % len(nonce)] for i, b in enumerate(seen))
    assert plain == b"cdc-password\0"
