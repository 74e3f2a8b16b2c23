"""GavelIterator: run a PyTorch training loop under gavel_ng's leases (see docs/deploy.md)."""

from .distributed import init_distributed
from .iterator import GavelIterator
from .lease import JobEnv

__all__ = ["GavelIterator", "JobEnv", "init_distributed"]
