import pytest

TINY = dict(cluster="v100=4,p100=4,k80=4", window="0:12", round_seconds=3600.0, max_hours=300.0)


@pytest.fixture
def tiny_args(reference_table_path):
    """CLI flags of a tiny, fast grid point (12 jobs on 12 GPUs, hour-long rounds)."""
    return ["--cluster", TINY["cluster"], "--window", TINY["window"], "--round-seconds", "3600",
            "--max-hours", "300", "--throughputs", str(reference_table_path)]


@pytest.fixture
def tiny_base(reference_table_path):
    return {**TINY, "throughputs": str(reference_table_path)}
