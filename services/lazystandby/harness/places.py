"""The four places of a topology, named once: seed 000's Nu, N, N' and Nd as the harness keys them (nodes,
ports, statuses, faults and every run's `before`/`after`). A place is where a node starts; its role may
change at run time (N' becomes the primary at a takeover, N rejoins as the standby), so the harness asks a
node's status for its role and keys it by place.

Place is a str: its members equal the text they key a run's JSON with ("nu", "n", "n2", "nd")."""

from __future__ import annotations

from enum import StrEnum


class Place(StrEnum):
    NU = "nu"  # upstream: the source, its output queue OQu and the backup
    N = "n"  # the first primary
    N2 = "n2"  # the first standby
    ND = "nd"  # downstream: the sink


NU, N, N2, ND = Place.NU, Place.N, Place.N2, Place.ND
OPERATORS = (N, N2)  # the places of an operator node, primary first
ROLE_AT_START = {NU: "upstream", N: "primary", N2: "standby", ND: "downstream"}
NAME = {NU: "Nu", N: "N", N2: "N'", ND: "Nd"}
PLACE_OF_ROLE = {role: place for place, role in ROLE_AT_START.items()}
