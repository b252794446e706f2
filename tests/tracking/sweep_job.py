"""A Hydra app over ipuexp's config that tracks each job with a result shaped like the engine's.

Run by the tests as ``python sweep_job.py -m key=a,b ...``; throughput grows with gradient accumulation and
the memory per IPU with the IO tiles, so each job logs different figures.
"""
import sys
from pathlib import Path

import hydra

sys.path.insert(0, str(Path(__file__).parent))
from tracking_fixtures import sample_result  # noqa: E402

from ipuexp.config.store import CONF_DIR, register  # noqa: E402
from ipuexp.tracking import JobTracking, track_job  # noqa: E402

register()


@hydra.main(version_base=None, config_path=str(CONF_DIR), config_name="config")
def main(cfg):
    ga, tiles = cfg.options.gradient_accumulation, cfg.options.io.num_io_tiles
    with track_job(JobTracking.of(cfg)) as run:
        run.log_result(sample_result(throughput=100.0 * ga, ipu_bytes=400_000_000 + 1_000_000 * tiles))


if __name__ == "__main__":
    main()
