"""gymbuild: NeMo Gym evaluation configs in, Slurm jobs and a findable record out.

The version lives here (and in pyproject.toml) because the job record names the tool that wrote it.
"""

__version__ = "0.1.0"
