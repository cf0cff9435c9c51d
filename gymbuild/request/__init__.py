"""What the user asked: the vocabulary of the command line, as data, and one command line parsed.

- `verbs`: every verb once (its line, the arguments it reads, examples, NeMo Gym's flags, what it
  writes, whether it connects ahead or works on a sweep); the help, the doit commands, the entry
  points and every set of verbs are derived from it
- `arguments`: each reserved `name=value` argument with its type, its reader and the fix for a bad value
- `invocation`: one command line read into a typed, frozen `Invocation`

It imports only the ground below it; everything that runs a verb is above it.
"""
