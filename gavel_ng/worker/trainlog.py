"""A training script's record of what it did: rank 0's JSON lines in CHECKPOINT_DIR/train.jsonl.

The built-in runner and the adaptive example write one line per step and per checkpoint
load and save; the loopback tests read them to see that restores are real and that the
loss falls. Step lines are kept in memory and appended about once a second and at exit, off
the training path (a job killed with -9 loses at most its last half second of them); an
event (a checkpoint saved or loaded, rare) is written at once: a save's line lost to a
kill -9 while its checkpoint stayed made a later restore look like one of nothing saved.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

FLUSH_SECONDS = 0.5


class TrainLog:
    def __init__(self, checkpoint_dir: str | None, rank: int):
        ckpt = os.environ.get("GAVEL_NG_CHECKPOINT_DIR") or checkpoint_dir
        self.path = Path(ckpt) / "train.jsonl" if ckpt and rank == 0 else None
        self.attempt = int(os.environ.get("GAVEL_NG_ATTEMPT", "0"))
        self.lines: list[str] = []
        self._flushed = time.monotonic()

    @property
    def on(self) -> bool:
        return self.path is not None

    def record(self, **fields) -> None:
        if self.path is not None:
            self.lines.append(json.dumps({"attempt": self.attempt, "t": round(time.time(), 3), **fields}))
            if "event" in fields or time.monotonic() - self._flushed > FLUSH_SECONDS:
                self.flush()

    def flush(self) -> None:
        self._flushed = time.monotonic()
        if self.path is not None and self.lines:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write("".join(line + "\n" for line in self.lines))
            self.lines = []
