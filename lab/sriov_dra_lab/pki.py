"""A throwaway PKI for the local control plane: one CA, serving and client certificates, SA keys.

Owns key and certificate generation with ``cryptography``. It writes PEM files into a directory the
caller owns and never touches system trust stores. Keys are EC P-256 (fast to generate); the
service-account signing key is RSA 2048, the algorithm kube-apiserver documents for that flag.
Validity is one year from a caller-supplied ``not_before`` so that the clock stays outside.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class CertPair:
    """Paths of one PEM certificate and its private key."""

    cert: Path
    key: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


class Authority:
    """A self-signed CA that issues serving and client certificates into ``directory``.

    Shapes: files are ``<name>.crt`` / ``<name>.key`` PEM; the CA is ``ca.crt`` / ``ca.key``.
    Source: the certificate layout kube-apiserver expects for ``--client-ca-file`` and
    ``--tls-cert-file`` (x509 client authentication: CN is the user, O entries are groups).
    """

    def __init__(self, directory: Path, *, not_before: dt.datetime) -> None:
        self.directory = directory
        self.not_before = not_before
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sriov-dra-lab-ca")])
        self._name = name
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_before + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.ca = CertPair(directory / "ca.crt", directory / "ca.key")
        self.ca.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        _write_key(self.ca.key, self._key)

    def issue(
        self,
        name: str,
        *,
        common_name: str,
        organizations: tuple[str, ...] = (),
        dns_names: tuple[str, ...] = (),
        ip_addresses: tuple[str, ...] = (),
        server: bool = False,
        client: bool = False,
    ) -> CertPair:
        """Issue a leaf certificate signed by this CA and write it as ``<name>.crt/.key``.

        Shapes: ``common_name`` becomes the Kubernetes user name and each organization a group
        for client certificates; ``dns_names``/``ip_addresses`` become SANs for serving ones.
        Raises: ``ValueError`` if an IP address is malformed.
        """
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.not_before)
            .not_valid_after(self.not_before + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = CertPair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(pair.key, key)
        return pair


def write_service_account_keys(directory: Path) -> CertPair:
    """Write the service-account token signing key pair as ``sa.key`` (private) and ``sa.pub``.

    Shapes: RSA 2048, PKCS8 private key and SubjectPublicKeyInfo public key, PEM. The returned
    pair's ``cert`` field holds the public key path.
    Source: kube-apiserver ``--service-account-signing-key-file`` / ``--service-account-key-file``.
    """
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pair = CertPair(directory / "sa.pub", directory / "sa.key")
    _write_key(pair.key, key)
    pair.cert.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pair
