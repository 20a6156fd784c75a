"""The one gateway to Slurm (docs/decisions.md#one-gateway-to-slurm): every Slurm command goes through
:func:`slurm.gateway.get_gateway` and raises only :class:`slurm.errors.SlurmError`."""

from .errors import SlurmError, SlurmRateLimited, SlurmTimeout, SlurmUnreachable, SlurmVersionUnknown
from .gateway import SlurmGateway, get_gateway, reset_gateway
from .transports.base import CommandResult, Transport

__all__ = [
    "CommandResult",
    "SlurmError",
    "SlurmGateway",
    "SlurmRateLimited",
    "SlurmTimeout",
    "SlurmUnreachable",
    "SlurmVersionUnknown",
    "Transport",
    "get_gateway",
    "reset_gateway",
]
