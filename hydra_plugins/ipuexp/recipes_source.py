"""Hydra plugins that put the user's recipe folder (``./recipes`` or ``$IPUEXP_RECIPE_DIR``) in the ``recipe`` group.

A search-path entry ``ipuexp-recipes://DIR`` is appended to every ipuexp composition; its config source serves
``DIR/NAME.yaml`` as ``recipe/NAME.yaml``, so ``+recipe=NAME`` finds it without a ``recipe/`` subfolder. Hydra
searches the package first, so a user recipe never replaces a packaged one.
"""
from __future__ import annotations

import os
from typing import List, Optional

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import OmegaConf

SCHEME = "ipuexp-recipes"
GROUP = "recipe"


class UserRecipesSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from ipuexp.config.user_recipes import user_recipe_dir

        # Only for ipuexp's own compositions (another Hydra app in the same environment is left alone).
        if any("ipuexp.conf" in (e.path or "") for e in search_path.get_path()):
            search_path.append("ipuexp-user", f"{SCHEME}://{user_recipe_dir()}")


class UserRecipesSource(ConfigSource):
    def __init__(self, provider: str, path: str) -> None:
        super().__init__(provider=provider, path=path)

    @staticmethod
    def scheme() -> str:
        return SCHEME

    def _file(self, config_path: str) -> Optional[str]:
        group, _, name = self._normalize_file_name(config_path).partition("/")
        return os.path.join(self.path, name) if group == GROUP and name and "/" not in name else None

    def load_config(self, config_path: str) -> ConfigResult:
        file = self._file(config_path)
        if file is None or not os.path.isfile(file):
            raise ConfigLoadError(f"Config not found : {file or config_path}")
        with open(file, encoding="utf-8") as f:
            header = ConfigSource._get_header_dict(f.read(512))
            f.seek(0)
            cfg = OmegaConf.load(f)
        return ConfigResult(config=cfg, path=f"{SCHEME}://{self.path}", provider=self.provider, header=header)

    def available(self) -> bool:
        return os.path.isdir(self.path)

    def is_group(self, config_path: str) -> bool:
        return config_path in ("", GROUP) and self.available()

    def is_config(self, config_path: str) -> bool:
        file = self._file(config_path)
        return file is not None and os.path.isfile(file)

    def list(self, config_path: str, results_filter: Optional[ObjectType]) -> List[str]:
        files: List[str] = []
        if config_path == "" and self.available():
            return [GROUP] if results_filter in (None, ObjectType.GROUP) else []
        if config_path == GROUP and self.available():
            for file in os.listdir(self.path):
                if file.endswith(".yaml") and os.path.isfile(os.path.join(self.path, file)):
                    self._list_add_result(files=files, file_path=f"{GROUP}/{file}", file_name=file,
                                          results_filter=results_filter)
        return sorted(set(files))
