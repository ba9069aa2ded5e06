"""What a verdict records about the GPU: the right GPU, and its state while the kernels ran."""

import os
import stat
import time
from pathlib import Path

import pytest
import torch

from evaluator.harness import ceilings, environment

# Two GPUs, as on a two-GPU host: the evaluation runs on the second one.
OURS, OTHER = "GPU-bbbb-2222", "GPU-aaaa-1111"
FAKE_SMI = f"""#!/bin/sh
echo "$@" >> "{{args}}"
case "$*" in
  *--query-compute-apps*)
    echo "4242, {OURS}"
    echo "4243, {OURS}"
    echo "5555, {OTHER}"
    while :; do sleep 0.05; done ;;
  *--loop-ms*)
    echo "1410, 3201, 60, 650.0, 0x0000000000000000, {OTHER}"
    echo "1980, 3201, 40, 350.5, 0x0000000000000000, {OURS}"
    echo "1755, 3201, 45, 699.0, 0x0000000000000004, {OURS}"
    echo "[N/A], [N/A], [N/A], [N/A], [N/A], {OURS}"
    echo "345, 3201, 36, 80.1, 0x0000000000000001, {OURS}"
    while :; do sleep 0.05; done ;;
  *)
    echo "NVIDIA H200, 580.159.04, 345 MHz, 3201 MHz, 1980 MHz, 37, 80.00 W, 0x1, {OTHER}"
    echo "NVIDIA H200, 580.159.04, 1980 MHz, 3201 MHz, 1980 MHz, 41, 300.00 W, 0x0, {OURS}" ;;
esac
"""


def fake_smi(tmp_path, monkeypatch, *, uuid: str = "bbbb-2222") -> Path:
    args = tmp_path / "args"
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    script.write_text(FAKE_SMI.format(args=args))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(environment, "gpu_uuid", lambda: uuid)
    return args


def sampled(period_ms: int = 50, count: int = 4) -> environment.GpuMonitor:
    with environment.GpuMonitor(period_ms=period_ms) as monitor:
        deadline = time.monotonic() + 10
        while len(monitor.samples) < count and time.monotonic() < deadline:
            time.sleep(0.01)
    return monitor


def test_the_monitor_summarises_its_own_gpu_clocks_heat_power_and_throttling(tmp_path, monkeypatch):
    args = fake_smi(tmp_path, monkeypatch)

    summary = sampled().summary()

    # The other GPU's line and the line of [N/A]s are left out.
    assert summary["samples"] == 3
    assert summary["sm_clock_mhz"] == {"min": 345.0, "median": 1755.0, "max": 1980.0}
    assert summary["temperature_c_max"] == 45.0 and summary["power_w_max"] == 699.0
    assert summary["throttle_reasons"] == {"sw_power_cap": 1, "gpu_idle": 1}
    assert "--loop-ms=50" in args.read_text()


def test_the_monitor_will_not_guess_between_several_gpus(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, uuid="")

    summary = sampled().summary()

    assert summary["samples"] == 0 and "several GPUs" in summary["error"]


def test_the_monitor_stops_its_nvidia_smis(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch)
    with environment.GpuMonitor(period_ms=50) as monitor:
        pass
    assert len(monitor._procs) == 2
    assert all(proc.poll() is not None for proc in monitor._procs)


def test_the_monitor_lists_the_processes_holding_the_evaluation_gpu(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch)
    with environment.GpuMonitor(period_ms=50) as monitor:
        deadline = time.monotonic() + 10
        while len(monitor.contexts) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert monitor.gpu_pids() == {4242, 4243}


def test_without_nvidia_smi_the_summary_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with environment.GpuMonitor() as monitor:
        pass
    summary = monitor.summary()
    assert summary["samples"] == 0 and "nvidia-smi" in summary["error"]
    assert environment.gpu_state() == {}


def test_the_state_is_that_of_the_evaluation_gpu_not_the_first_one(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch)

    state = environment.gpu_state()

    assert state["uuid"] == OURS and state["temperature.gpu"] == "41"


def test_without_a_known_uuid_the_state_is_the_first_gpu_and_names_it(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, uuid="")
    assert environment.gpu_state()["uuid"] == OTHER


def test_there_is_no_uuid_without_a_gpu():
    # CI has no CUDA.
    assert environment.gpu_uuid() == ""


def test_each_timed_loop_gets_the_state_of_its_own_window():
    monitor = environment.GpuMonitor(period_ms=100)
    monitor._uuid = "bbbb-2222"
    ours = OURS.lower()
    monitor.samples = [
        (1.0, ours, (345.0, 3201.0, 36.0, 80.0, 1.0)),  # idle, before timing
        (2.1, ours, (1980.0, 3201.0, 40.0, 500.0, 0.0)),
        (2.2, ours, (1950.0, 3201.0, 41.0, 690.0, 4.0)),
        (3.1, ours, (1755.0, 3201.0, 44.0, 699.0, 4.0)),
        (3.2, "gpu-aaaa-1111", (1410.0, 3201.0, 60.0, 650.0, 0.0)),  # the other GPU
    ]

    summary = monitor.summary(windows={"small": (2.0, 2.5), "big": (3.0, 3.5), "none": (9, 10)})

    assert summary["samples"] == 4
    assert summary["timing"]["small"]["sm_clock_mhz"] == {
        "min": 1950.0,
        "median": 1980.0,
        "max": 1980.0,
    }
    assert summary["timing"]["small"]["throttle_reasons"] == {"sw_power_cap": 1}
    assert summary["timing"]["big"]["samples"] == 1
    assert "none" not in summary["timing"]


def test_a_workloads_window_is_the_step_that_timed_it():
    from evaluator.harness.protocol import timing_windows

    step = {"event": "ask", "what": "step"}
    seed = {"event": "ask", "what": "seed", "purpose": "call"}
    messages = [
        (0.5, step),  # a check step: no window
        (1.0, {"event": "output", "workload": "a"}),
        (1.5, step),  # a's timing step: warm-up, timed calls (a seed each), batch
        (1.6, seed),
        (1.9, seed),
        (2.0, {"event": "batch_begin", "workload": "a"}),
        (2.1, {"event": "batch_end", "workload": "a"}),
        (2.2, {"event": "timing", "workload": "a"}),
        (2.3, step),  # b's
        (2.4, seed),
        (3.0, {"event": "batch_begin", "workload": "b"}),
        (3.2, {"event": "timing", "workload": "b"}),
        (3.5, {"event": "done"}),
    ]

    assert timing_windows(messages) == {"a": (1.5, 2.3), "b": (2.3, 3.5)}


def test_the_childs_stages_split_its_time_at_hello_ready_and_done():
    from evaluator.harness.protocol import child_stages

    step = {"event": "ask", "what": "step"}
    messages = [
        (10.5, {"event": "hello", "pid": 7}),
        (12.0, {"event": "ready"}),
        (12.0, step),  # a check step: 1 s
        (12.5, {"event": "output", "workload": "a"}),
        (13.0, step),  # a timing step: 2.5 s
        (13.1, {"event": "ask", "what": "seed", "purpose": "call"}),
        (15.0, {"event": "batch_begin", "workload": "a"}),
        (15.4, {"event": "timing", "workload": "a"}),
        (15.5, step),  # another check step, then the end: 0.5 s
        (15.9, step),
        (16.0, {"event": "done"}),
    ]

    assert child_stages(messages, 10.0, 16.25) == {
        "start": 0.5,
        "setup": 1.5,
        "timing": 2.5,
        "checks": 1.5,
        "exit": 0.25,
    }


def test_a_child_that_died_before_ready_has_only_its_start():
    from evaluator.harness.protocol import child_stages

    assert child_stages([(3.0, {"event": "hello"})], 1.0, 9.0) == {"start": 2.0}
    assert child_stages([], 1.0, 9.0) == {}


def test_without_fp8_matrix_instructions_there_is_no_fp8_ceiling():
    if ceilings.fp8_matmul_supported():
        pytest.skip("this machine has fp8 matrix instructions")
    assert ceilings._measure_fp8_tflops() is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_gpu_records_an_fp8_ceiling_where_it_has_fp8_matrix_instructions(tmp_path, monkeypatch):
    monkeypatch.setenv("D2K_EVALUATOR_CACHE", str(tmp_path))
    measured = ceilings.ceilings(refresh=True)
    if not ceilings.fp8_matmul_supported():
        assert "peak_tflops_fp8" not in measured
        return
    # Hopper's dense fp8 rate is twice its bf16 one; the measured ratio sits near that.
    assert measured["peak_tflops_fp8"] > 1.4 * measured["peak_tflops_bf16"]


def test_the_verdict_names_the_unit_of_each_public_timed_workload_and_no_hidden_one():
    from taskformat.package import DEFAULT_CATALOG_DIR, load_task
    from taskformat.spec import Mode

    task = load_task(DEFAULT_CATALOG_DIR / "fp8_gemm_blockscale")

    units = environment.compute_dtypes(task.workloads_for(Mode.CUDA))

    assert units == {
        "fp8_4096x7168x2048": "fp8",
        "fp8_8192x4096x4096": "fp8",
        "fp8_128x7168x16384": "fp8",
    }


@pytest.mark.parametrize("fp8", [1250.0, None])
def test_the_ceilings_record_the_fp8_rate_only_where_it_was_measured(tmp_path, monkeypatch, fp8):
    monkeypatch.setenv("D2K_EVALUATOR_CACHE", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(ceilings, "_measure_copy_tbps", lambda: 4.2)
    monkeypatch.setattr(ceilings, "_measure_read_tbps", lambda: 4.4)
    monkeypatch.setattr(ceilings, "_measure_bf16_tflops", lambda: 740.0)
    monkeypatch.setattr(ceilings, "_measure_fp8_tflops", lambda: fp8)

    measured = ceilings.ceilings(refresh=True)

    assert (measured["peak_tbps"], measured["peak_tflops_bf16"]) == (4.4, 740.0)
    assert measured.get("peak_tflops_fp8") == fp8
    assert "e4m3 _scaled_mm" in measured["method"]
    assert ceilings.ceilings() == measured  # read back from the cache
