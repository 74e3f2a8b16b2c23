"""GavelIterator: run a PyTorch training loop under the scheduler's leases, asked for through
gavel_ng.protocol (see docs/deploy.md)."""

from .distributed import init_distributed
from .iterator import GavelIterator
from .lease import JobEnv

__all__ = ["GavelIterator", "JobEnv", "init_distributed"]
