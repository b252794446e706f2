"""A script's job: the configuration its first compiled model gives (its options, optimizer and split, then the
command line's overrides), the prediction and report of ``ipuexp.app.open_job``, the MLflow run its calls log
their losses to, and the functional figures written when the script ends."""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, List, Optional

from ipuexp.config.types import ConfigNode
from ipuexp.poptorch.errors import DoesNotFit, PredictionDone

from ipuexp.poptorch.logs import log

_current: List["Session"] = []


class Session:
    """One job of a script."""

    def __init__(self, base_cfg: Optional[ConfigNode] = None, command_line: Optional[List[str]] = None,
                 out_dir: Optional[Path] = None, predict_only: bool = False, standalone: bool = False) -> None:
        self.base_cfg = base_cfg
        self.command_line = list(command_line or [])
        self.out_dir = out_dir
        self.predict_only = predict_only
        self.standalone = standalone
        """Opened by a script that imports ipuexp.poptorch itself: the job ends when the interpreter exits."""
        self.job: Optional[Any] = None
        self._stack = contextlib.ExitStack()
        self.predicted = False
        self.steps = 0
        self.samples = 0
        self.seconds = 0.0
        self.last_loss = float("nan")
        self.cfg: Optional[ConfigNode] = None
        self.result: Any = None
        """The job's Result (or Skipped), once predicted."""
        self.graph: Any = None
        """The captured graph of the predicted model."""

    # ---- the prediction --------------------------------------------------------------------------------------
    def predict(self, graph: Any, values: dict, no_effect: List[str]) -> None:
        """Compose the job's configuration from ``values`` (the script's) and the command line, predict ``graph``
        (the captured model), report and open the MLflow run; with ``predict_only``, end the script here."""
        from omegaconf import OmegaConf

        from ipuexp.app import open_job
        from ipuexp.config.errors import ConfigError, from_omegaconf

        self.predicted = True
        self.graph = graph
        _end_progress_lines()
        cfg = self._base()
        given = {o.split("=", 1)[0].lstrip("+~") for o in self.command_line}
        script = {k: v for k, v in values.items() if not any(k == g or k.startswith(g + ".") for g in given)}
        try:
            for key, value in script.items():
                OmegaConf.update(cfg, key, value, merge=False)
        except ConfigError:
            raise
        except Exception as exc:  # OmegaConf's validation: one line naming the key
            raise from_omegaconf(exc, {k: str(v) for k, v in script.items()}) from None
        self.cfg = cfg
        from ipuexp.poptorch.mapping import text

        shown = [f"{k}={text(v)}" for k, v in script.items()
                 if not k.startswith(("model.", "tracking.")) and (k, v) != ("training", True)]
        point = _sweep_point()
        if point in (None, 0):  # a sweep's launcher names each point: the script's options once
            _say("the script's options as ipuexp overrides: " + " ".join(shown))
        ours = [o for o in self.command_line if not o.lstrip("+~").startswith("tracking.experiment=")]
        if ours and point is None:
            _say("and from the command line: " + " ".join(ours))
        if no_effect:
            log.warning("these change nothing ipuexp predicts: %s", ", ".join(sorted(set(no_effect))))
        out = self._out_dir()
        self._seed_capture(cfg)
        self.job = self._stack.enter_context(open_job(cfg, out, report_prediction=True))
        self.result = getattr(self.job, "result", self.job)
        if self.standalone:
            import atexit

            atexit.register(self.close)  # after the tracking's own exit net, so it runs first: the run FINISHED
        if self.predict_only:
            self.close()
            raise PredictionDone()
        if getattr(self.result, "fits", None) is False and cfg.report.get("fail_on_oom", False) \
                and _sweep_point() is None:  # a sweep's point is a result in its summary, as for python -m ipuexp
            self.close()
            raise DoesNotFit()

    def _base(self) -> Any:
        import copy

        from omegaconf import open_dict

        if self.base_cfg is not None:
            cfg = copy.deepcopy(self.base_cfg)
        else:
            from ipuexp.config.compose import compose_config

            cfg = compose_config(self.command_line)
        with open_dict(cfg):
            cfg.pop("hydra", None)
        return cfg

    def _out_dir(self) -> Path:
        if self.out_dir is None:
            self.out_dir = Path("outputs") / "poptorch" / time.strftime("%Y-%m-%d_%H-%M-%S")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        return self.out_dir

    def _seed_capture(self, cfg: ConfigNode) -> None:
        from omegaconf import OmegaConf

        from ipuexp.runner.captures import capture_key, seed

        exp = OmegaConf.to_object(cfg)
        seed(capture_key(exp.model, exp.data.micro_batch_size, exp.engine.cache_dir), self.graph)

    # ---- the calls -------------------------------------------------------------------------------------------
    def log_call(self, losses: List[float], samples: int, seconds: float) -> None:
        """One training call: its weight updates' mean losses, samples and wall time."""
        run = getattr(self.job, "run", None)
        for loss in losses:
            self.steps += 1
            self.last_loss = loss
            if run is not None:
                run.log_step_metrics(self.steps, {"train_loss": loss})
        self.samples += samples
        self.seconds += seconds
        if run is not None and seconds > 0:
            run.log_step_metrics(self.steps, {"host_samples_per_s": samples / seconds})

    def close(self, error: Optional[BaseException] = None) -> None:
        """End the job: the functional figures into the result, ``result.json`` rewritten, the run closed."""
        if self.job is not None and hasattr(self.job, "result") and self.steps:
            from ipuexp.result import FunctionalFigures

            result = self.job.result
            result.functional = FunctionalFigures(
                final_loss=self.last_loss, samples_per_s=self.samples / self.seconds if self.seconds else 0.0,
                steps=self.steps, predicted_samples_per_s=result.throughput.samples_per_s)
            f = result.functional
            _say(f"{f.steps} weight updates on this host, final loss {f.final_loss:.4f} (predicted on the IPUs: "
                 f"{f.predicted_samples_per_s:,.0f} samples/s); result.json updated")
            # A line of its own: how fast this host ran the numerics varies, the line above does not.
            _say(f"this host ran them at {f.samples_per_s:,.0f} samples/s")
        self.job = None
        if error is None:
            self._stack.close()
        else:
            self._stack.__exit__(type(error), error, error.__traceback__)


def _sweep_point() -> Any:
    """The job's number in a Hydra multirun, None outside one."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    return HydraConfig.get().job.num


def _say(line: str) -> None:
    """One message, wrapped to the terminal (``COLUMNS``) with its continuation lines indented."""
    import shutil
    import textwrap

    width = shutil.get_terminal_size((100, 24)).columns
    print(textwrap.fill(f"ipuexp.poptorch: {line}", width=max(width, 40), subsequent_indent="    ",
                        break_long_words=False, break_on_hyphens=False), flush=True)


@contextlib.contextmanager
def session(s: Session) -> Any:
    """Make ``s`` the session of the models compiled in the ``with`` block."""
    _current.append(s)
    try:
        yield s
    finally:
        _current.remove(s)


def current() -> Session:
    """The session of the running command, or one of its own for a script that imports ipuexp.poptorch itself
    (it ends when the interpreter exits)."""
    if not _current:
        _current.append(Session(standalone=True))
    return _current[-1]


def _end_progress_lines() -> None:
    """End the line of every progress bar the script has open (tqdm's): the prediction's report starts on a line
    of its own, not after a bar's last frame, which ends in a carriage return and no newline."""
    import sys

    tqdm = sys.modules.get("tqdm")
    ended = set()
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", None) or []):
        fp = getattr(bar, "fp", None)
        if fp is None or id(fp) in ended or getattr(bar, "disable", False):
            continue
        ended.add(id(fp))
        try:
            fp.write("\n")
            fp.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing to end
            pass
