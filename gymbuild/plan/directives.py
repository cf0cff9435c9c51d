"""The `#SBATCH` directives of a job."""

from __future__ import annotations

from collections.abc import Mapping

from gymbuild.config.model import Config
from gymbuild.config.rules_strings import SBATCH_UNSAFE, is_sbatch_option
from gymbuild.errors import UserError


def _directive(key: str, value: object, where: str) -> tuple[str, str | None]:
    """sbatch reads `#SBATCH` lines itself (double quotes group words); refuse what it cannot carry."""
    text = None if value is None or value is True else str(value)  # None: a bare flag
    for part in (key, text or ""):
        if SBATCH_UNSAFE.search(part):  # the rules refused these first, with the config path
            raise UserError(
                f"{where}: {part!r} cannot be written as an #SBATCH directive "
                "(no double quotes, backslashes or newlines)"
            )
    if not is_sbatch_option(key):
        raise UserError(f"{where}: {key!r} is not an sbatch option name")
    return key, text


def _config_directives(
    config: Config,
) -> tuple[tuple[tuple[str, str | None], ...], tuple[tuple[str, str | None], ...]]:
    """The `#SBATCH` directives every benchmark shares: those between its job-name and its chdir, and
    those after its chdir (the order sbatch sees them in is the order written)."""
    compute = config.compute
    where = f"compute.{compute.name}"
    before = []
    if compute.account:
        before.append(_directive("account", compute.account, f"{where}.account"))
    if compute.walltime:
        before.append(_directive("time", compute.walltime, f"{where}.walltime"))
    pool_extra: dict[str, object] = {}
    for pool in compute.node_pools.values():
        pool_extra.update(pool.extra_args)
    # NeMo Gym's order: the compute's extra_args, then the pools' directives, then the pools'
    # extra_args, a key both name written twice, as NeMo Gym writes it: sbatch decides. It keeps the
    # last of most options, so a pool's partition, nodes or GPUs win over the same key in
    # compute.extra_args, but it adds up others (`--mail-type=END` then `=FAIL` is END,FAIL), which
    # dropping the first would lose (tests/parity/test_slurm_sample.py). A pool's `false` still
    # switches the compute's off.
    compute_extra = {k: v for k, v in compute.extra_args.items() if pool_extra.get(k) is not False}
    after: list[tuple[str, str | None]] = [("output", "logs/slurm-%j.log"), *_extra(compute_extra, where)]
    pools = list(compute.node_pools.values())
    if pools:
        first = pools[0]
        after.append(_directive("partition", first.partition, f"{where}.node_pools.{first.name}.partition"))
        after.append(("nodes", str(compute.total_nodes)))
        after.append(("ntasks-per-node", str(first.ntasks_per_node)))
        if first.gpus_per_node is not None:
            after.append(("gpus-per-node", str(first.gpus_per_node)))
    after += _extra(pool_extra, where)
    return tuple(before), tuple(after)


def _extra(args: Mapping[str, object], where: str) -> list[tuple[str, str | None]]:
    """sbatch's flags take no value (`--hold=true` is refused): `true` writes the bare flag, `false`
    writes nothing, so a pool can switch off what the cluster's extra_args switched on."""
    return [_directive(k, v, f"{where}.extra_args.{k}") for k, v in args.items() if v is not False]
