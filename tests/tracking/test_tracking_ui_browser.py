"""The sweep as a user sees it: ``mlflow server``, headless Chromium, and the addresses ipuexp logs at a sweep's end.

Logs a 3x3 bert_large sweep (gradient accumulation x IO tiles) through the real engine, with the sweep's Hydra
callback around its jobs as in a multirun. The callback logs two addresses in the MLflow UI; each is opened in a
fresh browser profile and checked with no click: the experiment's runs table in MLflow's model-training view (not
the GenAI view a plain experiment address opens), and the comparison of the sweep's runs, whose parameters are the
curated ones (the swept two differing, with their values), whose metrics are the curated ones (with the values
logged) and whose parallel-coordinates plot draws the swept parameters against throughput. The comparison is
saved as docs/img/mlflow-compare.png when asked.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from ipuexp.config.compose import compose_config as compose
from ipuexp.tracking import JobTracking, SweepContext, curated, track_job

# The README's picture; refreshed only when asked (IPUEXP_UPDATE_SCREENSHOT=1) so test runs leave the tree clean.
DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "mlflow-compare.png"
EXPERIMENT = "bert_large"
GA, TILES = (256, 1024, 2048), (0, 32, 64)
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


@pytest.fixture
def chromium() -> tuple[str, str]:
    """Paths of the browser and its driver; the test is skipped (before starting anything) without them."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip("chromium and chromedriver are not installed (Debian: apt-get install -y chromium chromium-driver)")
    return browser, driver


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path: Path, db_uri: str) -> Iterator[str]:
    """``mlflow server`` on a free local port over a fresh SQLite store; stopped after the test."""
    port = _free_port()
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", db_uri,
                             "--artifacts-destination", str(tmp_path / "mlartifacts"), "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1"], cwd=tmp_path, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mlflow server did not start:\n" + (tmp_path / "server.log").read_text()[-3000:])
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _log_sweep(url: str, sweep_dir: Path, caplog) -> tuple[str, List[str], List[str]]:
    """A real 3x3 bert_large sweep through the analytic engine (gradient accumulation x IO tiles) between the Hydra
    callback's start and end, as a multirun runs it; the run ids of its parent and children, and the addresses the
    callback logged."""
    from omegaconf import OmegaConf, open_dict

    from ipuexp.runner.evaluation import evaluate
    from ipuexp.tracking.hydra_callback import SweepTracking

    keys = ["options.gradient_accumulation", "options.io.num_io_tiles"]
    sweep_overrides = [f"{keys[0]}={','.join(map(str, GA))}", f"{keys[1]}={','.join(map(str, TILES))}"]
    common = ["+recipe=bert_large", f"tracking.uri={url}", f"tracking.experiment={EXPERIMENT}"]
    driver = compose(common, return_hydra_config=True)
    with open_dict(driver):
        driver.hydra.sweep.dir = str(sweep_dir)
        driver.hydra.overrides.task = ["+recipe=bert_large", *sweep_overrides]
    callback = SweepTracking()
    callback.on_multirun_start(driver)
    run_ids = []
    for ga in GA:
        for tiles in TILES:
            overrides = [f"{keys[0]}={ga}", f"{keys[1]}={tiles}"]
            cfg = compose([*common, *overrides])
            ctx = SweepContext(dir=sweep_dir, job_overrides=["+recipe=bert_large", *overrides], swept_keys=keys,
                               sweep_overrides=sweep_overrides)
            with track_job(JobTracking.of(cfg, sweep=ctx)) as run:
                run.log_result(evaluate(OmegaConf.to_object(cfg), cache_dir=str(sweep_dir / "captures")).result)
                run_ids.append(run.run_id)
    with caplog.at_level("INFO", logger="ipuexp"):
        callback.on_multirun_end(driver)
    from mlflow import MlflowClient

    parent = MlflowClient(url).get_run(run_ids[0]).data.tags["mlflow.parentRunId"]
    # The experiment's address is logged; the comparison's, which names every run, is in the sweep folder's page.
    import html
    import re

    page = (sweep_dir / "mlflow_compare.html").read_text(encoding="utf-8")
    compare = html.unescape(re.search(r'href="([^"]+)"', page).group(1))
    return parent, run_ids, [*(w for w in caplog.text.split() if w.startswith(url)), compare]


def _driver(browser: str, driver: str, profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for flag in CHROMIUM_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile}")  # a new, empty profile
    opts.add_argument("--window-size=1500,1800")
    return webdriver.Chrome(service=Service(driver), options=opts)


def _click(element, timeout_s: float = 15.0) -> None:
    """Click as a user would, waiting out overlays that are still fading (first-visit tips, menus)."""
    from selenium.common.exceptions import ElementClickInterceptedException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            element.click()
            return
        except ElementClickInterceptedException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


_CELLS_JS = """
return Array.from(arguments[0].querySelectorAll('.ReactVirtualized__Grid__innerScrollContainer > div'))
    .map(c => [parseFloat(c.style.top), parseFloat(c.style.left), c.innerText.trim()]);
"""


def _metric_rows(d) -> Dict[str, List[str]]:
    """Scroll the comparison's (virtualised) metrics table top to bottom: metric name -> values shown.

    The table is two grids, names and values, kept at the same scroll offset (as the page's own scroll sync
    does); a row's name and values share their ``top``.
    """
    from selenium.webdriver.common.by import By

    grids = d.find_elements(By.XPATH, "//button[@aria-label='Metrics - Show diff only']/ancestor::div["
                                      "contains(@class, 'collapse-content-box')]//div[@aria-label='grid']")
    name_grid, value_grid = grids
    # the furthest offset both grids can reach (the values grid loses a little height to its scrollbar)
    bottom = min(d.execute_script("return arguments[0].scrollHeight - arguments[0].clientHeight", g) for g in grids)
    rows: Dict[str, List[str]] = {}
    for top in list(range(0, bottom, 150)) + [bottom]:
        d.execute_script("arguments[0].scrollTop = arguments[1]", value_grid, top)
        seen, deadline = None, time.monotonic() + 10
        while time.monotonic() < deadline:  # the grids re-render asynchronously: wait for a stable, aligned picture
            time.sleep(0.25)
            offsets = d.execute_script("return [arguments[0].scrollTop, arguments[1].scrollTop]", name_grid, value_grid)
            if offsets != [top, top]:  # the names follow the values through React state, a render late
                d.execute_script("arguments[0].scrollTop = arguments[1]; arguments[2].scrollTop = arguments[1]",
                                 name_grid, top, value_grid)
                continue
            cells = (d.execute_script(_CELLS_JS, name_grid), sorted(d.execute_script(_CELLS_JS, value_grid)))
            if cells == seen:
                break
            seen = cells
        assert seen is not None, f"the metrics table did not settle at offset {top}"
        names, values = seen
        for t, _, name in names:
            if name:
                rows[name] = [text for vt, _, text in values if vt == t]
    return rows


def _close_overlays(d) -> None:
    """Dismiss what a first visit opens over the page (tips, the assistant panel): for the picture only."""
    from selenium.webdriver.common.by import By

    time.sleep(1)  # let them appear first
    for xpath in ("//button[normalize-space(.)='Got it']", "//button[@aria-label='Close']"):
        for button in d.find_elements(By.XPATH, xpath):
            if button.is_displayed():
                _click(button)


@pytest.mark.browser
@pytest.mark.slow
def test_the_sweeps_addresses_open_its_comparison_with_no_click(chromium, mlflow_server: str, tmp_path: Path,
                                                                 monkeypatch, caplog):
    browser, chromedriver = chromium
    from mlflow import MlflowClient
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    started = time.monotonic()
    parent, children, (experiment_url, compare_url) = _log_sweep(mlflow_server, tmp_path / "sweep", caplog)
    runs = [MlflowClient(mlflow_server).get_run(run_id) for run_id in children]
    swept = time.monotonic()

    # the experiment's address: the runs table of the model-training view, the sweep's parent run in it
    d = _driver(browser, chromedriver, tempfile.mkdtemp(dir=tmp_path))
    try:
        wait = WebDriverWait(d, 60)
        d.get(experiment_url)
        wait.until(EC.presence_of_element_located((By.XPATH, f"//div[contains(concat(' ', @class, ' '), ' ag-row ')]"
                                                             f"//a[contains(@href, '/runs/{parent}')]")))
        nav = d.find_element(By.TAG_NAME, "body").text.split("\n")
        assert "Runs" in nav and "Judges" not in nav and "Sessions" not in nav  # GenAI's pages are not offered
    finally:
        d.quit()

    # the comparison's address: the sweep's runs side by side
    d = _driver(browser, chromedriver, tempfile.mkdtemp(dir=tmp_path))
    try:
        wait = WebDriverWait(d, 60)
        d.get(compare_url)
        wait.until(EC.presence_of_element_located(
            (By.XPATH, f"//*[contains(text(), 'Comparing {len(children)} Runs')]")))
        params = wait.until(EC.presence_of_element_located(
            (By.XPATH, "//button[@aria-label='Parameters - Show diff only']/ancestor::div["
                       "contains(@class, 'collapse-content-box')]//table")))
        rows = {r.find_element(By.TAG_NAME, "th").text.replace("\n", ""):
                [c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in params.find_elements(By.TAG_NAME, "tr")}
        assert set(rows) == set(curated.KEY_OPTIONS)  # the curated parameters only (the swept two are among them)
        assert {k for k, values in rows.items() if len(set(values)) > 1} == \
            {"options.gradient_accumulation", "options.io.num_io_tiles"}
        assert sorted(map(int, rows["options.gradient_accumulation"])) == sorted(GA * 3)
        assert sorted(map(int, rows["options.io.num_io_tiles"])) == sorted(TILES * 3)

        metrics = _metric_rows(d)
        assert set(metrics) == set(runs[0].data.metrics)  # the curated metrics only
        logged = {k: [r.data.metrics[k] for r in runs] for k in metrics}
        for key, shown in metrics.items():
            assert shown, key
            # the UI shows values rounded for display
            assert all(any(abs(float(v) - x) <= 1e-3 * abs(x) + 0.05 for x in logged[key]) for v in shown), key
        plot = d.find_element(By.CSS_SELECTOR, ".pcp-plot").text
        for axis in ("options.gradient_accumulation", "options.io.num_io_tiles", "throughput_samples_per_s"):
            assert axis in plot, axis  # the swept parameters against throughput, as the page opened

        _close_overlays(d)
        d.execute_script("window.scrollTo(0, 0)")
        shot = DOCS_SCREENSHOT if os.environ.get("IPUEXP_UPDATE_SCREENSHOT") else tmp_path / "mlflow-compare.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        assert d.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    finally:
        d.quit()
    print(f"browser test: sweep logged in {swept - started:.1f} s, UI checked in {time.monotonic() - swept:.1f} s")
