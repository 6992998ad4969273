"""Every core: a capture dissected by several worker processes, the output as one process makes it.

Connections are independent, so each worker (worker.py) reads the whole capture and dissects the
connections it owns (part.py: decided at a flow's first packet, by the client's address, so that
a client's connections, which share topic ids, stay together unless one client has so many that
its worker gets ahead, as on a capture of one client host: plan.Plan.owns; `by="connection"`
spreads every connection). Per chunk of the files (the same in every worker), the workers send
what they made keyed by the packet it happened in; the parent (`run`) numbers exchanges and
connections as the single process does (driver.py) and hands the numbers back; the workers
render their exchanges with them and the parent writes the pieces in order (or, into a regular
file, tells each worker where its pieces go and the workers write them: placing.py). Output is
byte-identical to one process. The messages go through pipes, the workers' large column buffers
(Arrow's, numpy's) through shared memory where the system has it (pipes.py).

What one process shares between connections is checked at every chunk (driver.Checks): the
buffer budget, the flow table's caps (flows at once), topic ids learned on one connection and
looked up on another. What the workers remember of flows is bounded: past part.MAX_FLOWS flows
a flow's worker comes from a rule asked again where needed (plan.Plan.owns, past). Where the
workers could have differed from one process, `run` raises `Diverged` (saying how many
exchanges were written) and the caller dissects again in one process, skipping those.
`--port auto` and single-job runs go the single-process way from the start.
"""
from .plan import Plan, Shared, cores, jobs_for

__all__ = ["Diverged", "Plan", "Shared", "cores", "jobs_for", "run"]


def __getattr__(name):
    """The driver (and the workers' modules) loaded when a run is parallel: a single-process
    run asks only how many jobs."""
    if name in ("Diverged", "run"):
        from . import driver
        return getattr(driver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
