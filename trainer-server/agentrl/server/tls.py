"""TLS for `agentrl serve` (wss://): the server's SSL context, the self-signed certificate it makes for itself
(`--tls-self-signed`, kept in RUNS_DIR/.tls/ and reused at each start), and the SHA-256 fingerprint a user compares
with what the editor shows before trusting it. A client that pins a fingerprint instead of trusting certificate
authorities (`agentrl doctor --tls-fingerprint`, the tests) checks it during the TLS handshake, before it sends a
byte of HTTP, so a bearer token never reaches a server whose certificate is not the pinned one."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
import socket
import ssl
import stat
from pathlib import Path
from typing import Any

TLS_FOLDER = ".tls"  # in the runs folder: the self-signed certificate and its key
CERT_FILE = "cert.pem"
KEY_FILE = "key.pem"
SELF_SIGNED_DAYS = 3650  # a pinned certificate is trusted by its fingerprint, not its dates: a new one breaks the pins
WILDCARD_HOSTS = {"", "0.0.0.0", "::"}


def fingerprint(der: bytes) -> str:
    """A certificate's SHA-256 fingerprint as browsers, `openssl x509 -fingerprint -sha256` and Node print it:
    uppercase hex bytes joined by colons."""
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def certificate_fingerprint(cert_file: Path) -> str:
    """The fingerprint of the first certificate of a PEM file (the server's own, before its chain)."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    try:
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot read the certificate {cert_file}: {err}") from None
    return fingerprint(cert.public_bytes(Encoding.DER))


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """The server's side: TLS 1.2 at least, with this certificate (a PEM chain) and its unencrypted key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as err:
        raise ValueError(f"cannot serve TLS with the certificate {cert_file} and the key {key_file}: {err}") from None
    return context


def key_exposure(key_file: Path) -> str | None:
    """Why a key file others may read or write is a risk (whoever reads it can pose as this server), or None."""
    try:
        mode = key_file.stat().st_mode
    except OSError as err:
        raise ValueError(f"cannot read --tls-key: {err}") from None
    if not mode & 0o077:
        return None
    return (
        f"--tls-key {key_file} can be read or written by other users (mode {stat.S_IMODE(mode):04o}), who could then "
        f"pose as this server and read its clients' tokens; chmod 600 {key_file}"
    )


def names_for(host: str) -> list[str]:
    """The names a certificate for a server bound to `host` is made for: that address or name (for a wildcard bind,
    this machine's host names), then loopback's."""
    names = [socket.gethostname(), socket.getfqdn()] if host in WILDCARD_HOSTS else [host]
    names += ["localhost", "127.0.0.1", "::1"]
    return list(dict.fromkeys(name for name in names if name))


def _general_name(name: str) -> Any:
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _write_private(path: Path, data: bytes) -> None:
    """Writes a file only this user may read, through a fresh name (never a planted file or link), then renames it."""
    staging = path.with_name(f".{path.name}.new")
    staging.unlink(missing_ok=True)
    with os.fdopen(os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "wb") as out:
        out.write(data)
    os.replace(staging, path)


def _usable(cert_file: Path, key_file: Path, host: str) -> bool:
    """Whether a certificate made at an earlier start serves `host` still: its key beside it, in date, and (for a
    server bound to one address or name) made for that one."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_private_key

    try:
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        key = load_pem_private_key(key_file.read_bytes(), password=None)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, TypeError, x509.ExtensionNotFound):
        return False
    public = (Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    if cert.public_key().public_bytes(*public) != key.public_key().public_bytes(*public):
        return False  # a start that ended between writing the key and the certificate
    now = datetime.datetime.now(datetime.UTC)
    if not cert.not_valid_before_utc <= now < cert.not_valid_after_utc:
        return False
    return host in WILDCARD_HOSTS or _general_name(host) in san


def self_signed(folder: Path, host: str) -> tuple[Path, Path, bool]:
    """The self-signed certificate and key in `folder` (0700, files 0600) for a server bound to `host`: the one made
    at an earlier start while it still serves that host (so the fingerprint clients pinned stays the same), else a
    new one (an EC P-256 key). Returns the certificate, the key, and whether they were made now."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    from agentrl.server.private import private_folder

    private_folder(folder)
    cert_file, key_file = folder / CERT_FILE, folder / KEY_FILE
    if _usable(cert_file, key_file, host):
        return cert_file, key_file, False
    names = names_for(host)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0][:64])])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName([_general_name(name) for name in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_private(key_file, key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    _write_private(cert_file, cert.public_bytes(Encoding.PEM))
    return cert_file, key_file, True


def certificate_names(cert_file: Path) -> list[str]:
    """The names (subject alternative names) a certificate was made for, as text."""
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(name.value) for name in san]


class PinnedContext(ssl.SSLContext):
    """A client's SSL context that trusts one certificate, by its SHA-256 fingerprint, instead of certificate
    authorities: the handshake's certificate is compared in wrap_socket, so a client (websockets' connect) sends
    nothing to a server whose certificate is another."""

    pinned: str

    def wrap_socket(self, sock: socket.socket, *args: Any, **kwargs: Any) -> ssl.SSLSocket:  # type: ignore[override]
        wrapped = super().wrap_socket(sock, *args, **kwargs)
        if not wrapped.do_handshake_on_connect:
            wrapped.do_handshake()
        der = wrapped.getpeercert(binary_form=True)
        found = fingerprint(der) if der else "none"
        if found != self.pinned:
            wrapped.close()
            raise ssl.SSLCertVerificationError(
                f"the server's certificate has the SHA-256 fingerprint {found}, not the pinned {self.pinned}"
            )
        return wrapped


def pinned_client_context(pinned: str) -> PinnedContext:
    context = PinnedContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False  # the fingerprint names the certificate; its names are not what is trusted
    context.verify_mode = ssl.CERT_NONE
    context.pinned = pinned.strip().upper()
    return context
