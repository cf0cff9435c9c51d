"""The steps of a submission (stage, sync, queue, record) and what prints their result (show), each a
module of functions taking the run context (session.Session). pipeline.py runs them in order."""
