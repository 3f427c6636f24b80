"""A node's role as an explicit state machine, and the epoch that fences a demoted primary.

    STARTING -> UPSTREAM | DOWNSTREAM | PRIMARY | STANDBY
    STANDBY  -> PROMOTING -> PRIMARY          (failover, seed 000 section 3.6)
    PROMOTING -> STANDBY                      (takeover refused: someone newer won; or declined: Nd's
                                               primary still delivers, and the epoch is withdrawn)
    PRIMARY  -> LEAVING                       (a planned handover: asked to stop, it takes no more input,
                                               ends its lease at Nd, and its heartbeats tell the standby to
                                               take over at once)
    PRIMARY | PROMOTING | LEAVING -> FENCED   (a peer showed a newer epoch: stop sending, forever)
    PRIMARY -> STANDBY                        (rejoin: a primary that has delivered and taken nothing yet in
                                               this life was shown a newer epoch: it was started again into a
                                               pipeline that failed over without it, holds nothing, and joins
                                               as a standby, as a spare does)
    any -> STOPPED

Each takeover raises the epoch by one. Nu and Nd remember the highest epoch they have seen and refuse
anything older (StaleEpoch), so a primary that was paused past the timeout and then resumes cannot put a
single tuple into Nd's output.
"""

from __future__ import annotations

from enum import StrEnum

from .errors import IllegalTransition, StaleEpoch


class Role(StrEnum):
    STARTING = "starting"
    UPSTREAM = "upstream"
    DOWNSTREAM = "downstream"
    PRIMARY = "primary"
    STANDBY = "standby"
    PROMOTING = "promoting"
    FENCED = "fenced"
    LEAVING = "leaving"
    STOPPED = "stopped"


ALLOWED: dict[Role, frozenset[Role]] = {
    Role.STARTING: frozenset({Role.UPSTREAM, Role.DOWNSTREAM, Role.PRIMARY, Role.STANDBY, Role.STOPPED}),
    Role.STANDBY: frozenset({Role.PROMOTING, Role.STOPPED}),
    Role.PROMOTING: frozenset({Role.PRIMARY, Role.STANDBY, Role.FENCED, Role.STOPPED}),
    Role.PRIMARY: frozenset({Role.FENCED, Role.LEAVING, Role.STOPPED}),
    Role.LEAVING: frozenset({Role.FENCED, Role.STOPPED}),
    Role.FENCED: frozenset({Role.STOPPED}),
    Role.UPSTREAM: frozenset({Role.STOPPED}),
    Role.DOWNSTREAM: frozenset({Role.STOPPED}),
    Role.STOPPED: frozenset(),
}


class EpochFence:
    """The highest epoch a node has accepted; anything older is refused with StaleEpoch.

    Every role keeps one: Nu and Nd refuse a demoted primary's calls, and N and N' refuse calls from a Nu
    that speaks for an older epoch. The epoch never moves backwards."""

    def __init__(self, node: str, epoch: int = 0) -> None:
        self.node = node
        self.epoch = epoch

    def check(self, epoch: int, *, sender: str, what: str) -> None:
        if epoch < self.epoch:
            raise StaleEpoch(
                f"{self.node}: {what} from {sender} carries epoch {epoch}; current epoch is {self.epoch}"
            )

    def is_newer(self, epoch: int) -> bool:
        """`epoch` belongs to a takeover this node has not seen (a primary learns it was replaced)."""
        return epoch > self.epoch

    def advance(self, epoch: int) -> bool:
        """Adopt `epoch` if it is newer; returns True when it was."""
        newer = epoch > self.epoch
        if newer:
            self.epoch = epoch
        return newer

    def admit(self, epoch: int, *, sender: str, what: str) -> bool:
        """Check and adopt: returns True when `epoch` is newer than any seen before."""
        self.check(epoch, sender=sender, what=what)
        return self.advance(epoch)


class RoleState:
    """The current role and epoch of one node; every change of role goes through `become`, every change
    of epoch through the fence (forward only)."""

    def __init__(self, node: str, epoch: int = 0) -> None:
        self.node = node
        self.role = Role.STARTING
        self.fence = EpochFence(node, epoch)
        self.history: list[tuple[Role, int]] = [(self.role, epoch)]
        self._before_promoting = epoch  # the epoch in force when this node last became PROMOTING

    @property
    def epoch(self) -> int:
        return self.fence.epoch

    def become(self, role: Role, epoch: int | None = None) -> None:
        if role not in ALLOWED[self.role]:
            raise IllegalTransition(f"{self.node}: {self.role} -> {role} is not allowed")
        if role is Role.PROMOTING:
            self._before_promoting = self.epoch
        self.role = role
        if epoch is not None:
            self.fence.advance(epoch)
        self.history.append((role, self.epoch))

    def withdraw(self) -> None:
        """PROMOTING -> STANDBY after Nd declined the takeover (its primary still delivers), back in the
        epoch before the one this node took for it. The one step back an epoch ever takes, and a safe one:
        Nd is asked first and took nothing from the declined takeover, so no node holds that epoch; keeping
        it would make this standby refuse Nu's backup, which still speaks for the epoch in force."""
        if self.role is not Role.PROMOTING:
            raise IllegalTransition(f"{self.node}: only a promoting node withdraws its epoch (it is {self.role})")
        self.role = Role.STANDBY
        self.fence.epoch = self._before_promoting
        self.history.append((self.role, self.epoch))

    def rejoin(self, *, worked: bool) -> None:
        """PRIMARY -> STANDBY for a primary shown a newer epoch before it `worked` in this life (delivered to
        Nd, took a frame from Nu, or took over): a node restarted with its old settings after a takeover.
        Such a node holds no tuple and sent none: joining as a standby, empty, costs nothing, where fencing
        it would leave the pipeline one standby short for good. A primary that has worked is fenced instead
        (its state belongs to a deposed epoch). The epoch stays; the registration with Nu moves it forward."""
        if self.role is not Role.PRIMARY or worked:
            why = "it has worked in this life" if worked else f"it is {self.role}"
            raise IllegalTransition(f"{self.node}: only a primary that has done nothing rejoins as a standby ({why})")
        self.role = Role.STANDBY
        self.history.append((self.role, self.epoch))

    def can(self, role: Role) -> bool:
        return role in ALLOWED[self.role]
