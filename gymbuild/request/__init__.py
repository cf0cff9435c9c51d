"""What the user asked: the vocabulary of the command line, as data, and one command line parsed.

- `verbs`: every verb once (its line, the arguments it reads, examples, NeMo Gym's flags, what it
  writes, whether it connects ahead or works on a sweep); the help, the doit commands, the entry
  points and every set of verbs are derived from it
- `arguments`: each reserved `name=value` argument with its type, its reader and the fix for a bad value
- `invocation`: one command line read into a typed, frozen `Invocation`
- `verb_args`: each verb's own frozen arguments (`StatusArgs`...), exactly those `verbs` lists for
  it, which the verb's function takes instead of the whole command line

It imports only the ground below it; everything that runs a verb is above it.
"""
