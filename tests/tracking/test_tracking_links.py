import json
from urllib.parse import parse_qs, unquote, urlsplit

from ipuexp.tracking import links


def test_addresses_open_the_model_training_views():
    base = links.ui_base("http://mlflow.example:5000/")
    assert base == "http://mlflow.example:5000"
    assert links.experiment_url(base, "7") == \
        "http://mlflow.example:5000/#/experiments/7/runs?workflowType=machine_learning"
    url = links.compare_url(base, "7", ["a1", "b2"])
    route, query = unquote(urlsplit(url).fragment).split("?", 1)
    assert route == "/compare-runs"
    q = parse_qs(query)
    assert json.loads(q["runs"][0]) == ["a1", "b2"] and json.loads(q["experiments"][0]) == ["7"]
    assert q["workflowType"] == ["machine_learning"]


def test_a_local_store_is_served_by_mlflow_ui():
    uri = "sqlite:////data/mlflow.db"
    assert links.ui_base(uri) == links.LOCAL_UI
    assert links.serve_hint(uri) == "mlflow ui --backend-store-uri sqlite:////data/mlflow.db"
    assert links.serve_hint("https://mlflow.example") is None
    assert links.ui_base("databricks") is None and links.serve_hint("databricks") is None
