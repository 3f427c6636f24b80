"""Who may send what: the protocol's authorization rule, in one place.

A node's identity is the role in its certificate (`ROLE:NAME` as the common name; deploy/tls/make-certs.sh).
N and N' share the role `operator`: either may become the primary. `admin` is for launchers, checks and
health probes, which only read status. The transport calls `authorize` once per call, before the handler
runs; handlers never check identity themselves.
"""

from __future__ import annotations

from enum import StrEnum

from .errors import PermissionDenied, Unauthenticated


class PeerRole(StrEnum):
    UPSTREAM = "upstream"
    OPERATOR = "operator"
    DOWNSTREAM = "downstream"
    ADMIN = "admin"


# RPC -> the roles that may send it (what each sender is, seed 000's topology).
MAY_SEND: dict[str, frozenset[PeerRole]] = {
    "Push": frozenset({PeerRole.UPSTREAM}),  # Nu -> primary
    "Backup": frozenset({PeerRole.UPSTREAM}),  # Nu -> standby
    "Deliver": frozenset({PeerRole.OPERATOR}),  # primary -> Nd
    "Takeover": frozenset({PeerRole.OPERATOR}),  # the standby taking over (or a primary announcing itself)
    "Heartbeat": frozenset({PeerRole.OPERATOR}),  # standby -> primary
    "RegisterStandby": frozenset({PeerRole.OPERATOR}),  # a standby joining Nu
    "Handover": frozenset({PeerRole.OPERATOR}),  # a primary handing over -> its standby
    "Status": frozenset(PeerRole),  # read-only: every node and the admin tools
    "Probe": frozenset({PeerRole.UPSTREAM}),  # Nu timing its link to the standby
    "Snapshot": frozenset({PeerRole.OPERATOR}),  # a primary's state -> its standby (Passive Standby)
}


def role_of(common_name: str) -> PeerRole:
    """The role in a certificate's common name `ROLE:NAME`; Unauthenticated when there is none."""
    role, sep, name = common_name.partition(":")
    try:
        if not sep or not name:
            raise ValueError
        return PeerRole(role)
    except ValueError:
        raise Unauthenticated(f"certificate {common_name!r} names no role; expected ROLE:NAME with ROLE one of "
                              f"{', '.join(PeerRole)}") from None


def authorize(rpc: str, common_name: str, *, node: str) -> None:
    """Raise unless a peer whose certificate is `common_name` may send `rpc` to `node`."""
    role = role_of(common_name)
    allowed = MAY_SEND.get(rpc, frozenset())
    if role not in allowed:
        raise PermissionDenied(f"{node}: {rpc} from {common_name} refused: role {role} may not send it "
                               f"(allowed: {', '.join(sorted(allowed)) or 'none'})")
