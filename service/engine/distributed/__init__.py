"""One model served by a group of processes (MLX's distributed backends, started by mlx.launch).

Every rank loads its shard (`load.py`); rank 0 serves and, each loop iteration, broadcasts what
its engine decided (`lockstep.py`, over `channel.py`) so that every rank steps the same batch; the
other ranks run only the engine loop (service/models/distributed.py), and wait on rank 0's
doorbell (`doorbell.py`) while the group is idle. docs/guides/distributed.md tells the story.
"""
