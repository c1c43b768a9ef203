"""How work runs, for the service and the command line alike: the pool of solver processes
and its jobs, the compute threads, wall-time and memory guards, native thread pools, queued
SRN jobs and their store, bounded shutdown, and the settings that bound all of them."""

__all__: list[str] = []
