"""Addresses in the MLflow UI that open a sweep on MLflow's model-training views, with no clicks on the way.

MLflow 3's UI shows an experiment either in its GenAI views (traces, sessions, judges) or in its model-training
views (runs table, charts, run comparison). UIs without the sidebar's "GenAI / Model training" switch choose by
the experiment's ``mlflow.experimentKind`` tag, which ipuexp sets to ``custom_model_development`` when it creates
an experiment. UIs with the switch (the one MLflow 3.17 serves) ignore that tag: the view is the address's
``workflowType`` query parameter, else the switch's last position in this browser (local storage key
``mlflow.workflowType``), else GenAI. No store setting changes that default, so ipuexp hands out addresses that
carry ``workflowType=machine_learning``; a page opened from the experiment list needs the switch set once per
browser.
"""
from __future__ import annotations

import json
from typing import List, Optional, Sequence
from urllib.parse import quote

MODEL_TRAINING = "workflowType=machine_learning"
"""The UI's query parameter that selects the model-training views."""
LOCAL_UI = "http://127.0.0.1:5000"
"""Where ``mlflow ui`` serves a local store by default."""
_LOCAL_SCHEMES = ("sqlite:", "file:", "postgresql", "mysql", "mssql")


def ui_base(uri: str) -> Optional[str]:
    """The UI's address for a tracking URI: the server itself, or ``mlflow ui``'s default for a local store."""
    if uri.startswith(("http://", "https://")):
        return uri.rstrip("/")
    if uri.startswith(_LOCAL_SCHEMES):
        return LOCAL_UI
    return None


def serve_hint(uri: str) -> Optional[str]:
    """The command that serves a store which no server is serving yet."""
    if uri.startswith(("http://", "https://")) or ui_base(uri) is None:
        return None
    return f"mlflow ui --backend-store-uri {uri}"


def experiment_url(base: str, experiment_id: str) -> str:
    """The experiment's runs table."""
    return f"{base}/#/experiments/{experiment_id}/runs?{MODEL_TRAINING}"


def compare_url(base: str, experiment_id: str, run_ids: Sequence[str]) -> str:
    """MLflow's comparison of ``run_ids``: their parameters and metrics side by side, and plots over them."""
    runs: List[str] = list(run_ids)
    return (f"{base}/#/compare-runs?runs={quote(json.dumps(runs, separators=(',', ':')))}"
            f"&experiments={quote(json.dumps([experiment_id]))}&{MODEL_TRAINING}")
