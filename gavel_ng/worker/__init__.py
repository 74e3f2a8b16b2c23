"""The worker daemon of the deployment runtime: what runs on a worker machine. One daemon per
server owns its GPUs, launches the job processes the scheduler sends (one per GPU, from
warm standby interpreters when it can), enforces their leases and reports how they ended;
run_job is the built-in trainer for the Gavel job types. It talks to the scheduler through
gavel_ng.protocol.
"""
