"""Hydra composes on libyaml through its public plugin API, so nothing of Hydra's or OmegaConf's is
patched (docs/performance.md, "Why the code is shaped so").

A config source (`libyaml://`) reads files as Hydra's `file://` source does but parses them with
`fastyaml.omegaconf_load`, and a search-path plugin points the primary config directory at it while
`libyaml()` is active (Hydra used any other way in the process keeps its own file source).
Whenever libyaml fails, or gives anything OmegaConf.load would not accept, the file is read again with
`OmegaConf.load`, so every message is word for word what Hydra would have said.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar

import yaml
from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import DictConfig, ListConfig, OmegaConf

from gymbuild.config.fastyaml import libyaml_rules, omegaconf_load

SCHEME = "libyaml"
# Whether the search-path plugin redirects the primary directory: set by `libyaml()` for its block.
# Hydra's plug-ins are registered process-wide (its own registry), so the switch is what keeps them
# inert outside the block; a context variable, so another thread's Hydra keeps its file source.
_ACTIVE: ContextVar[bool] = ContextVar("gymbuild_libyaml_active", default=False)


class LibyamlConfigSource(ConfigSource):
    """Hydra's file source with a faster parser: the same lookups, headers and results. Written out
    rather than subclassed because Hydra's FileConfigSource lives in `hydra._internal`, which is not
    public; tests/config/test_hydra_source.py holds the two to the same results."""

    @staticmethod
    def scheme() -> str:
        return SCHEME

    def _full_path(self, config_path: str) -> str:
        return os.path.realpath(os.path.join(self.path, config_path))

    def load_config(self, config_path: str) -> ConfigResult:
        full_path = self._full_path(self._normalize_file_name(config_path))
        if not os.path.exists(full_path):
            raise ConfigLoadError(f"Config not found : {full_path}")
        with open(full_path, encoding="utf-8") as f:
            text = f.read()
            header = ConfigSource._get_header_dict(text[:512])
            try:
                tree = omegaconf_load(text)
                parsed = True
            except yaml.YAMLError:
                tree, parsed = None, False
            cfg: DictConfig | ListConfig
            if parsed and tree is None:
                cfg = OmegaConf.create()
            elif parsed and isinstance(tree, dict | list | str):
                cfg = OmegaConf.create(tree)
            else:  # OmegaConf.load gives its own result or error, with the file's name
                f.seek(0)
                cfg = OmegaConf.load(f)
        return ConfigResult(config=cfg, path=self.full_path(), provider=self.provider, header=header)

    def available(self) -> bool:
        return self.is_group("")

    def is_group(self, config_path: str) -> bool:
        return os.path.isdir(self._full_path(config_path))

    def is_config(self, config_path: str) -> bool:
        return os.path.isfile(self._full_path(self._normalize_file_name(config_path)))

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        files: list[str] = []
        for name in os.listdir(self._full_path(config_path)):
            self._list_add_result(
                files=files,
                file_path=os.path.join(config_path, name),
                file_name=name,
                results_filter=results_filter,
            )
        return sorted(set(files))


class PrimaryDirOnLibyaml(SearchPathPlugin):
    """Serves the primary config directory (`initialize_config_dir`'s) from LibyamlConfigSource."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        if not _ACTIVE.get():
            return
        for element in search_path.get_path():
            if element.provider == "main" and "://" not in element.path:
                element.path = f"{SCHEME}://{element.path}"


def _register() -> bool:
    """Installs the two plugins through Hydra's public `Plugins.register` (idempotent); False without
    libyaml, when there is nothing to gain."""
    from hydra.core.plugins import Plugins

    if not libyaml_rules():
        return False
    plugins = Plugins.instance()
    plugins.register(LibyamlConfigSource)
    plugins.register(PrimaryDirOnLibyaml)
    return True


@contextlib.contextmanager
def libyaml() -> Iterator[None]:
    """Hydra initialised inside this block reads its primary config directory with libyaml."""
    if not _register() or _ACTIVE.get():
        yield
        return
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
