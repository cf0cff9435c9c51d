"""What limits how many jobs the user may queue: the association's and the QOS's MaxSubmitJobs and
MaxJobs (sacctmgr), MaxArraySize (scontrol show config), and how many jobs the user has queued now
(squeue), read by one command in the run's session and parsed into one frozen `Limits`.

Why: Slurm refuses an sbatch beyond MaxSubmitJobs (AssocMaxSubmitJobLimit, "Job violates accounting/
QOS policy"), and a submission larger than the quota used to end with most of its benchmarks
"failed". Knowing the room before the first sbatch lets the submit queue what fits and keep the rest
waiting (submit/quota.py). A site without accounting (sacctmgr fails, or slurmdbd is not there) just
has no limits found: every field None, and nothing is held back.

The limits read are those of the user's association in the account the job names (MaxSubmitJobs,
MaxJobs, MaxTRES per job: inherited from the account when the user's own is unset, as sacctmgr shows
them; and the association's own GrpSubmitJobs/GrpJobs), the group limits of that account and of
every account above it (GrpSubmitJobs, GrpJobs: all users' jobs in the account and its sub-accounts
count), and the QOS's per-user, group and per-job limits (MaxSubmitJobsPerUser, MaxJobsPerUser,
GrpSubmitJobs, GrpJobs, MaxTRES). Against a group limit the jobs of every user count, so the queue
is counted for all users (squeue), by account, QOS and whether the job is the user's own. A
rejection by a limit still unread (a partition's QOS, a group TRES limit, a race with another
sbatch) is taken as "wait" (`refused_by_limit`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gymbuild.shell import quote

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection

# sbatch's words when a limit refuses a job (slurm_errno strings and the job's pending reasons).
# Any of them in sbatch's message: the job waits for room, it did not fail.
LIMIT_WORDS = (
    "MaxSubmitJob",  # AssocMaxSubmitJobLimit, QOSMaxSubmitJobPerUserLimit, ...
    "SubmitJobLimit",
    "MaxJobsPer",
    "GrpSubmit",
    "violates accounting/QOS policy",
    "Job violates accounting",
    "MaxArraySize",
    "maximum array size",
)

# The sections of the one command's output: `@<name>` lines, each section ending with `@rc <status>`.
_SECTIONS = ("user", "assoc", "tree", "qos", "config", "queued")
_ASSOC_FIELDS = "Account,User,Partition,MaxSubmit,MaxJobs,QOS,DefaultQOS,GrpSubmit,GrpJobs,MaxTRES"


def limits_script(user: str | None = None) -> str:
    """One bash command printing everything `parse` reads, each tool's output in its own section
    with its exit status: `@user` the default account, `@assoc` the user's associations, `@tree`
    the accounts' own associations (parent and group limits), `@qos` the QOSs' per-user and group
    limits, `@config` MaxArraySize, `@queued` every user's queued jobs (array tasks one each, `-r`:
    every task counts against MaxSubmitJobs) counted by account, QOS and whether they are the
    user's (1) or another's (0): only the counts cross the connection, however long the queue.

    The six run side by side (each sacctmgr call is a round trip to slurmdbd: one after the other
    they were two thirds of a second of a feed's time), into files of a temporary directory, printed
    in order once all have ended."""
    who = quote(user) if user else '"$(id -un)"'
    p = "sacctmgr -n -P show"
    tools = {
        "user": f'{p} user "$u" format=DefaultAccount',
        "assoc": f'{p} assoc where user="$u" format={_ASSOC_FIELDS}',
        "tree": f"{p} assoc where user= format=Account,User,ParentName,GrpSubmit,GrpJobs",
        "qos": f"{p} qos format=Name,MaxSubmitPU,MaxJobsPU,GrpSubmit,GrpJobs,MaxTRES",
        "config": "scontrol show config 2>/dev/null | grep -E '^MaxArraySize '",
        "queued": (
            "squeue -h -r -o '%a|%q|%u' 2>/dev/null"
            ' | awk -F\'|\' -v u="$u" \'{print $1 "|" $2 "|" ($3 == u)}\' | sort | uniq -c;'
            " (exit ${PIPESTATUS[0]})"
        ),
    }
    return "\n".join(
        [
            f"u={who}",
            "d=$(mktemp -d) || exit 1",
            *(
                f'{{ {{ {command}; }} >"$d/{name}" 2>/dev/null; echo "$?" >"$d/{name}.rc"; }} &'
                for name, command in tools.items()
            ),
            "wait",
            f'for s in {" ".join(tools)}; do echo "@$s"; cat "$d/$s"; echo "@rc $(cat "$d/$s.rc")"; done',
            'rm -rf "$d"',
        ]
    )


@dataclass(frozen=True)
class Limits:
    """The limits one job of the user's meets, in one account and QOS, as read at one moment.

    `max_submit_jobs`: the tightest of the association's MaxSubmitJobs and the QOS's
    MaxSubmitJobsPerUser (None: no limit found), with `queued` the user's jobs that count against
    that same limit now; `max_jobs`: likewise for running jobs (a job beyond it pends, it is not
    refused); `max_array_size`: the cluster's MaxArraySize (an array's indices are below it).
    `submit_source` and `jobs_source` name where each limit came from, for the line that says why a
    benchmark waits, and `counted` whose jobs `queued` counts (a group limit counts every user's).
    `never`: a limit that lets no job of this account and QOS in at all (a MaxSubmitJobs, MaxJobs or
    group limit of 0): the job would wait for room that can never free, so the submit refuses it.
    """

    max_submit_jobs: int | None = None
    max_jobs: int | None = None
    max_array_size: int | None = None
    queued: int = 0
    submit_source: str = ""
    jobs_source: str = ""
    counted: str = "of your jobs"
    never: str = ""
    max_tres: tuple[tuple[str, int, str], ...] = ()  # per job: (TRES, its maximum, where it is from)

    @property
    def room(self) -> int | None:
        """How many more jobs (array tasks count one each) the limit lets the user queue; None: no limit."""
        if self.max_submit_jobs is None:
            return None
        return max(0, self.max_submit_jobs - self.queued)

    def fits(self, weights: list[int]) -> int:
        """How many of the jobs, in order, fit now (each weighing its number of tasks): the first
        that does not fit, and every job after it, waits (the order of the config is kept)."""
        room = self.room
        if room is None:
            return len(weights)
        taken = 0
        for count, weight in enumerate(weights):
            if taken + weight > room:
                return count
            taken += weight
        return len(weights)

    def too_big(self, directives: Mapping[str, str | None]) -> str:
        """The per-job TRES limit (MaxTRESPerJob of the association or the QOS) a job with these
        #SBATCH directives exceeds (job_tres), named with what it asks; "" when it fits. Such a job
        would pend for good."""
        need = job_tres(directives)
        for tres, most, source in self.max_tres:
            if need.get(tres, 0) > most:
                return f"{source} (a job here asks {tres}={need[tres]})"
        return ""

    def why(self) -> str:
        """The limit that holds jobs back, and where it comes from, in one line."""
        return f"{self.submit_source} ({self.queued} {self.counted} are queued there now)"


def refused_by_limit(message: str) -> bool:
    """sbatch's message names a limit: the job waits for room (it is not a failure)."""
    return any(word.lower() in message.lower() for word in LIMIT_WORDS)


def _sections(text: str) -> dict[str, list[str]]:
    """Section name -> its lines, for the sections whose tool exited 0 (the others: absent)."""
    found: dict[str, list[str]] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("@rc "):
            if name is not None and line.removeprefix("@rc ").strip() == "0":
                found[name] = lines
            name, lines = None, []
        elif line.startswith("@") and line[1:] in _SECTIONS:
            name, lines = line[1:], []
        elif name is not None and line.strip():
            lines.append(line)
    return found


def _number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


# One limit as read: its value (None: unset), where it comes from, the jobs counted against it now
# and whose they are.
_Limit = tuple[int | None, str, int, str]
_MINE, _ALL = "of your jobs", "jobs of all its users"


def _tightest(limits: list[_Limit]) -> _Limit:
    """The limit that leaves the least room, among those set."""
    found = [one for one in limits if one[0] is not None]
    if not found:
        return None, "", 0, _MINE
    return min(found, key=lambda one: (one[0] or 0) - one[2])


@dataclass(frozen=True)
class _Assoc:
    """One row of `sacctmgr show assoc` (format=_ASSOC_FIELDS); a capture without the group
    columns reads as having no group limits."""

    account: str
    user: str
    partition: str
    max_submit: int | None
    max_jobs: int | None
    qos: tuple[str, ...]
    default_qos: str
    grp_submit: int | None = None
    grp_jobs: int | None = None
    max_tres: str = ""

    @classmethod
    def of(cls, line: str) -> _Assoc | None:
        fields = line.split("|")
        if len(fields) < 7:
            return None
        account, user, partition, submit, jobs, qos, default = fields[:7]
        grp_submit, grp_jobs, max_tres = [*fields[7:10], "", "", ""][:3]
        return cls(
            account,
            user,
            partition,
            _number(submit),
            _number(jobs),
            tuple(filter(None, qos.split(","))),
            default,
            _number(grp_submit),
            _number(grp_jobs),
            max_tres,
        )

    def qos_for(self, named: str | None) -> str | None:
        """The QOS a job of this association runs in: the one it names, else the association's
        default, else its only one, else `normal` where it may use it (Slurm's own choice)."""
        if named or self.default_qos:
            return named or self.default_qos
        if len(self.qos) == 1:
            return self.qos[0]
        return "normal" if "normal" in self.qos else None


@dataclass(frozen=True)
class _Queue:
    """The `@queued` counts: jobs by (account, QOS, the user's own or not)."""

    counts: dict[tuple[str, str, bool], int]

    @classmethod
    def of(cls, lines: list[str]) -> _Queue:
        counts: dict[tuple[str, str, bool], int] = {}
        for line in lines:
            number, _, scope = line.strip().partition(" ")
            account, qos, mine = ([*scope.split("|"), "1"])[:3]  # no flag: a capture of the user's only
            key = (account, qos, mine.strip() != "0")
            counts[key] = counts.get(key, 0) + (_number(number) or 0)
        return cls(counts)

    def count(self, account: str | None = None, qos: str | None = None, *, mine: bool = True) -> int:
        return sum(
            n
            for (a, q, own), n in self.counts.items()
            if (account is None or a == account) and (qos is None or q == qos) and (own or not mine)
        )

    def under(self, ancestor: str, parents: Mapping[str, str]) -> int:
        """Every user's jobs in `ancestor` and the accounts below it (a group limit's count)."""
        return sum(n for (a, _, _), n in self.counts.items() if ancestor in _lineage(a, parents))


def _lineage(account: str, parents: Mapping[str, str]) -> list[str]:
    """The account and every account above it, nearest first (a loop in a bad capture ends it)."""
    chain = [account]
    while (parent := parents.get(chain[-1], "")) and parent not in chain:
        chain.append(parent)
    return chain


def _group_limits(
    sections: dict[str, list[str]], account: str | None, qos: str | None, queue: _Queue
) -> tuple[list[_Limit], list[_Limit]]:
    """(submit, jobs) group limits of the account, the accounts above it, and the QOS: each counts
    every user's jobs below it."""
    tree: dict[str, tuple[str, int | None, int | None]] = {}
    for line in sections.get("tree", []):
        fields = (line.split("|") + [""] * 5)[:5]
        if not fields[1]:  # an account's own row (a user's row is in @assoc)
            tree[fields[0]] = (fields[2], _number(fields[3]), _number(fields[4]))
    parents = {name: parent for name, (parent, _, _) in tree.items()}
    submit: list[_Limit] = []
    jobs: list[_Limit] = []
    for name in _lineage(account, parents) if account else []:
        _, grp_submit, grp_jobs = tree.get(name, ("", None, None))
        used = queue.under(name, parents)
        submit.append((grp_submit, f"GrpSubmitJobs={grp_submit} of account {name}", used, _ALL))
        jobs.append((grp_jobs, f"GrpJobs={grp_jobs} of account {name}", used, _ALL))
    for line in sections.get("qos", []):
        fields = (line.split("|") + [""] * 5)[:5]
        if qos and fields[0] == qos:
            used = queue.count(qos=qos, mine=False)
            submit.append((_number(fields[3]), f"GrpSubmitJobs={fields[3]} of QOS {qos}", used, _ALL))
            jobs.append((_number(fields[4]), f"GrpJobs={fields[4]} of QOS {qos}", used, _ALL))
    return submit, jobs


def parse(text: str, account: str | None = None, qos: str | None = None) -> Limits:
    """The `Limits` of a job in `account` (None: the user's default) and `qos` (None: the
    association's default), from `limits_script`'s output. What a tool did not answer is not known."""
    sections = _sections(text)
    if account is None:
        account = next(iter(sections.get("user", [])), "").strip() or None
    mine = [a for a in map(_Assoc.of, sections.get("assoc", [])) if a is not None and a.account == account]
    assoc = next((a for a in mine if not a.partition), mine[0] if mine else None)  # all partitions' row
    qos = assoc.qos_for(qos) if assoc else qos
    per_qos = {r[0]: [*r, "", "", ""] for r in (line.split("|") for line in sections.get("qos", []))}
    the_qos = per_qos.get(qos or "", [""] * 6)
    queue = _Queue.of(sections.get("queued", []))
    in_account, in_qos = queue.count(account or ""), queue.count(qos=qos or "")
    qos_submit, qos_jobs = _number(the_qos[1]), _number(the_qos[2])
    where = f"association {account}/{assoc.user}" if assoc else ""
    a = assoc or _Assoc("", "", "", None, None, (), "")
    group_submit, group_jobs = _group_limits(sections, account, qos, queue)
    submits: list[_Limit] = [
        (a.max_submit, f"MaxSubmitJobs={a.max_submit} of {where}", in_account, _MINE),
        (a.grp_submit, f"GrpSubmitJobs={a.grp_submit} of {where}", in_account, _MINE),
        (qos_submit, f"MaxSubmitJobsPerUser={qos_submit} of QOS {qos}", in_qos, _MINE),
        *group_submit,
    ]
    jobs: list[_Limit] = [
        (a.max_jobs, f"MaxJobs={a.max_jobs} of {where}", in_account, _MINE),
        (a.grp_jobs, f"GrpJobs={a.grp_jobs} of {where}", in_account, _MINE),
        (qos_jobs, f"MaxJobsPerUser={qos_jobs} of QOS {qos}", in_qos, _MINE),
        *group_jobs,
    ]
    max_submit, submit_source, queued, counted = _tightest(submits)
    max_jobs, jobs_source, _, _ = _tightest(jobs)
    never = next((one[1] for one in [*submits, *jobs] if one[0] == 0), "")
    max_tres = (*_tres(a.max_tres, f"of {where}"), *_tres(the_qos[5], f"of QOS {qos}"))
    array = None
    for line in sections.get("config", []):
        key, _, value = line.partition("=")
        if key.strip() == "MaxArraySize":
            array = _number(value)
    return Limits(max_submit, max_jobs, array, queued, submit_source, jobs_source, counted, never, max_tres)


def _tres(text: str, where: str) -> list[tuple[str, int, str]]:
    """`node=1,gres/gpu=2` (sacctmgr's MaxTRES) as (TRES, maximum, source), for the TRES a job's
    directives say exactly (job_tres)."""
    found = []
    for item in filter(None, text.split(",")):
        tres, _, value = item.partition("=")
        if tres in _JOB_TRES and _number(value) is not None:
            found.append((tres, _number(value) or 0, f"MaxTRESPerJob {tres}={value} {where}"))
    return found


_JOB_TRES = ("node", "gres/gpu")


def _count(value: str | None) -> int | None:
    """The count of a directive's value: `2`, `2-4` (the least), `a100:8` and `gpu:a100:8` (the last)."""
    if not value:
        return None
    return _number(value.rsplit(":", 1)[-1].split("-", 1)[0])


def job_tres(directives: Mapping[str, str | None]) -> dict[str, int]:
    """What one job with these #SBATCH directives asks of the TRES a per-job limit caps: its nodes
    (`nodes`, else 1) and its GPUs (`gpus`, else `gpus-per-node` or `gres=gpu:N` times the nodes).
    CPUs are left out: what Slurm counts depends on the site's core layout."""
    nodes = _count(directives.get("nodes")) or 1
    need = {"node": nodes}
    per_node = _count(directives.get("gpus-per-node"))
    gres = directives.get("gres") or ""
    if per_node is None and gres.startswith("gpu"):
        per_node = _count(gres)
    gpus = _count(directives.get("gpus"))
    if gpus is None and per_node is not None:
        gpus = per_node * nodes
    if gpus is not None:
        need["gres/gpu"] = gpus
    return need


def ask(conn: Connection, directives: Mapping[str, str | None]) -> Callable[[], Limits]:
    """Send `limits_script` into the run's session now (one round trip, whatever the number of
    jobs) and return what reads and parses its answer: the limits a job with these #SBATCH
    directives (its `account` and `qos`) meets. The answer is read in the order sent."""
    marker = conn.send(limits_script())
    account, qos = directives.get("account") or None, directives.get("qos") or None
    return lambda: parse(conn.receive(marker).stdout, account, qos)
