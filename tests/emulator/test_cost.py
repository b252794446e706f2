"""Op cost model: matmul efficiency, memory-bound ops, precision and partials, IO tiles, backward vs forward."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ipuexp.config.schema import ExperimentConfig, IPUHardware, PartialsType
from ipuexp.config.store import CONF_DIR
from ipuexp.emulator.cost import block_cycles, op_cycles
from ipuexp.emulator.matmul_plan import plan_matmul
from ipuexp.graph.types import BlockCapture, OpRecord, Stage, TensorInfo
from ipuexp.execution.execution import build_plan, tile_context
from ipuexp.execution.hardware import Calibration, rates


def hardware(gen: str = "bow") -> IPUHardware:
    cfg = OmegaConf.merge(OmegaConf.structured(IPUHardware), OmegaConf.load(CONF_DIR / "ipu" / f"{gen}.yaml"))
    return OmegaConf.to_object(cfg)


def context(amp: float = 0.6, partials: str = "half", precision: str = "16.16", io_tiles: int = 0, gen="bow"):
    exp = ExperimentConfig()
    exp.ipu = hardware(gen)
    exp.options.available_memory_proportion = amp
    exp.options.partials_type = PartialsType(partials)
    exp.options.precision = precision
    exp.options.io.num_io_tiles = io_tiles
    return tile_context(build_plan(exp, [Stage(0, 0, [])]), 0)


def mm(m: int, k: int, n: int, phase: str = "fwd", count: int = 1) -> OpRecord:
    return OpRecord("aten.mm", "matmul", phase, count, 2 * m * k * n * count, (m * k + k * n) * count,
                    m * n * count, [m, k, n])


def flop_efficiency(m: int, k: int, n: int, ctx) -> float:
    """Achieved share of the AMP peak for one product."""
    cycles = op_cycles(mm(m, k, n), ctx).total
    return 2 * m * k * n / (cycles * ctx.compute_tiles * ctx.flops_per_cycle)


def test_calibration_is_read_from_the_ipu_config():
    exp = replace_ipu(ExperimentConfig(), hardware("mk2"))
    cal = rates(exp.ipu, exp.system, exp.options.io.num_io_tiles).calibration
    assert 0 < cal.amp_efficiency <= 1 and 0 < cal.vector_efficiency <= 1 and cal.compute_set_cycles > 0
    with pytest.raises(ValueError, match="ipu.calibration is missing"):
        Calibration.from_mapping({}, "mk2")
    values = dict(hardware("mk2").calibration, amp_efficiency=1.5)
    with pytest.raises(ValueError, match=r"ipu.calibration.amp_efficiency=1.5 is invalid: allowed in \(0, 1\]"):
        Calibration.from_mapping(values, "mk2")


def replace_ipu(exp, ipu):
    exp.ipu = ipu
    return exp


def test_plan_efficiency_depends_on_shape():
    ctx = context()
    big = flop_efficiency(4096, 1024, 4096, ctx)
    skinny = flop_efficiency(8, 1024, 4096, ctx)
    assert 0 < skinny < big < ctx.amp_efficiency


def test_half_partials_are_faster_than_float():
    # Seed 001 5.2: halving the partials precision doubles matmul speed.
    half, flt = context(partials="half"), context(partials="float")
    assert flt.flops_per_cycle == half.flops_per_cycle / 2
    t_half = op_cycles(mm(2048, 1024, 4096), half).total
    t_float = op_cycles(mm(2048, 1024, 4096), flt).total
    assert t_half < t_float < 2.2 * t_half


def test_fp32_is_slower_than_fp16():
    assert op_cycles(mm(2048, 1024, 4096), context(precision="32.32", partials="float")).total > \
        op_cycles(mm(2048, 1024, 4096), context(partials="float")).total


def test_io_tiles_take_tiles_away_from_compute():
    assert context(io_tiles=64).compute_tiles == context().compute_tiles - 64
    assert op_cycles(mm(4096, 1024, 4096), context(io_tiles=128)).total > \
        op_cycles(mm(4096, 1024, 4096), context()).total


def test_memory_bound_ops_scale_with_bytes_and_views_are_free():
    ctx = context()
    small = op_cycles(OpRecord("aten.gelu", "elementwise", "fwd", 1, 0, 1 << 20, 1 << 20), ctx)
    large = op_cycles(OpRecord("aten.gelu", "elementwise", "fwd", 1, 0, 1 << 24, 1 << 24), ctx)
    assert large.compute == pytest.approx(16 * small.compute)
    assert large.exchange == small.exchange  # one superstep each
    assert op_cycles(OpRecord("aten.view", "data", "fwd", 3, 0, 0, 0), ctx).total == 0
    norm = op_cycles(OpRecord("aten.native_layer_norm", "norm", "fwd", 1, 0, 1 << 20, 1 << 20), ctx)
    assert norm.compute > small.compute  # statistics pass, then normalise


def test_batched_products_split_their_right_operands():
    # bmm [B*M, K, N] with B right operands: attention scores. Splitting over the batch keeps operands local.
    ctx = context()
    b, m, k, n = 128, 128, 64, 128
    rec = OpRecord("aten.bmm", "matmul", "fwd", 1, 2 * b * m * k * n, b * m * k + b * k * n, b * m * n,
                   [b * m, k, n])
    batched = op_cycles(rec, ctx).exchange
    shared = plan_matmul(b * m, k, n, b * m * k, b * k * n, 1, ctx).exchange_cycles
    assert batched < shared


def layer(m: int = 2048, h: int = 1024) -> BlockCapture:
    f = 4 * h
    ops = [mm(m, h, f), OpRecord("aten.gelu", "elementwise", "fwd", 1, 0, m * f, m * f), mm(m, f, h),
           mm(m, h, f, "bwd"), mm(f, m, h, "bwd"), OpRecord("aten.gelu_backward", "elementwise", "bwd", 1, 0,
                                                             2 * m * f, m * f),
           mm(m, f, h, "bwd"), mm(h, m, f, "bwd")]
    t = TensorInfo([m, h], "float32", m * h)
    return BlockCapture("ffn", True, 2 * h * f, 2, h * f, sum(o.flops for o in ops[:3]),
                        sum(o.flops for o in ops[3:]), m * f, 0, 2 * m * f, [t], [t], ops, 3, 5)


def test_backward_costs_about_twice_forward():
    # Seed 001 5.3.2: "the backwards pass takes between 2 to 2.2 times as many cycles as a forward pass"; here
    # the ratio comes from the captured backward ops.
    bc = block_cycles(layer(), context())
    assert 1.6 < bc.bwd.total / bc.fwd.total < 2.6
