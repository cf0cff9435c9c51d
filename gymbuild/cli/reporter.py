"""doit's console reporter rewritten for a tool whose stdout belongs to the user.

stdout carries only what a command is asked to print (a resolved config, a manifest with json=1);
progress and failures go to stderr. A user error (doit's TaskFailed) is printed as its message alone; a
bug (TaskError) keeps its traceback so it can be reported.
"""

from __future__ import annotations

import sys

from doit.exceptions import TaskError, TaskFailed, UnmetDependency


class Undecided(TaskError):
    """A gate that could not decide (errors.Inconclusive): doit counts a TaskError as status 2, where
    a TaskFailed is 1; printed as its message alone, as a TaskFailed is."""


class GymReporter:
    desc = "gymbuild: results on stdout, progress and errors on stderr"

    def __init__(self, outstream, options):
        self.failures: list[str] = []
        self.err = sys.stderr

    def initialize(self, tasks, selected_tasks):
        pass

    def get_status(self, task):
        pass

    def execute_task(self, task):
        pass

    def add_failure(self, task, fail):
        if isinstance(fail, UnmetDependency):  # held back by a failure already printed: not news
            return
        text = fail.message if isinstance(fail, TaskFailed | Undecided) else f"{task.name}: {fail.get_msg()}"
        if fail.report and text not in self.failures:
            self.failures.append(text)
            self.err.write(text.rstrip("\n") + "\n")

    def add_success(self, task):
        pass

    def skip_uptodate(self, task):
        pass

    def skip_ignore(self, task):
        pass

    def cleanup_error(self, exception):
        self.err.write(exception.get_msg())

    def runtime_error(self, msg):
        self.err.write(f"error: {msg}\n")

    def teardown_task(self, task):
        pass

    def complete_run(self):
        self.err.flush()
