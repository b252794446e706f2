from ipuexp.tracking.identity import chunks, config_hash, job_tags, resolved


def test_config_hash_ignores_tracking_and_runner_but_not_options(make_cfg):
    base = config_hash(make_cfg())
    assert base == config_hash(make_cfg())
    assert len(base) == 16
    assert config_hash(make_cfg("tracking.experiment=other", "runner.ray.num_cpus=3",
                                "engine.cache_dir=/somewhere")) == base
    assert config_hash(make_cfg("options.gradient_accumulation=2")) != base
    assert config_hash(make_cfg("options.io.num_io_tiles=32")) != base
    cfg = make_cfg("engine.cache_dir=/somewhere")
    data = resolved(cfg)
    assert config_hash(data) == config_hash(cfg) == base  # a resolved config hashes as its DictConfig does
    assert data["engine"]["cache_dir"] == "/somewhere"  # and is left whole


def test_job_tags_name_hardware_and_version(make_cfg):
    tags = job_tags(make_cfg())
    assert tags["ipu"] == "mk2" and tags["system"] == "pod16"
    assert tags["config_hash"] == config_hash(make_cfg())
    assert tags["ipuexp_version"]
    assert "recipe" not in tags  # no recipe selected


def test_chunks():
    assert chunks(list(range(250)), 100) == [list(range(100)), list(range(100, 200)), list(range(200, 250))]
