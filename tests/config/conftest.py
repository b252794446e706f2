"""The config tests' fixtures: composition as ``python -m ipuexp`` does it, the published files (shared with the
importer tests)."""
from config_fixtures import compose_config, data_dir  # noqa: F401
