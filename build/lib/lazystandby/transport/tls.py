"""Mutual TLS between nodes: each node presents its certificate (role in the common name, ROLE:NAME) and
accepts only peers whose certificate the deployment's CA signed. Certificates come from
deploy/tls/make-certs.sh (a development CA) or from the organisation's CA.

Without TLS a node listens in plaintext: any client that reaches the port can call it, so plaintext is
for loopback and tests, and the node says so in a warning at start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc


@dataclass(frozen=True, slots=True)
class TlsFiles:
    ca: str
    cert: str
    key: str

    @classmethod
    def from_config(cls, cfg) -> TlsFiles | None:
        """The node's TLS files, or None for plaintext; a half-configured TLS is an error, not plaintext."""
        given = {"tls_ca": cfg.tls_ca, "tls_cert": cfg.tls_cert, "tls_key": cfg.tls_key}
        if not any(given.values()):
            return None
        missing = [k for k, v in given.items() if not v]
        if missing:
            raise ValueError(f"TLS needs tls_ca, tls_cert and tls_key; {', '.join(missing)} not set")
        for k, v in given.items():
            if not Path(v).is_file():
                raise ValueError(f"{k}: {v} is not a readable file")
        return cls(cfg.tls_ca, cfg.tls_cert, cfg.tls_key)

    def _read(self) -> tuple[bytes, bytes, bytes]:
        return Path(self.ca).read_bytes(), Path(self.cert).read_bytes(), Path(self.key).read_bytes()

    def server(self) -> grpc.ServerCredentials:
        """Server side: present our certificate, require and verify the client's."""
        ca, cert, key = self._read()
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)

    def channel(self) -> grpc.ChannelCredentials:
        """Client side: verify the server against the CA, present our certificate."""
        ca, cert, key = self._read()
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def peer_common_name(context: grpc.ServicerContext) -> str:
    """The common name of the verified certificate the caller presented ("" without one)."""
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode() if names else ""
