"""How the child names a failure: a build error is the submission's, no toolchain is ours."""

from evaluator.harness.channel import classify
from evaluator.harness.channel import describe as _describe

BUILD_LOG = (
    "Error building extension 'k': [1/2] c++ -MMD -MF main.o.d -isystem /very/long/include "
    "-c /d2k/work/.torch_extensions/k/main.cpp -o main.o\n"
    "FAILED: main.o\n"
    "c++ -MMD -MF main.o.d -isystem /very/long/include -c main.cpp -o main.o\n"
    "/d2k/work/.torch_extensions/k/main.cpp:6:24: error: cannot convert 'at::Tensor' to 'int'\n"
    "    6 |     int not_a_tensor = x;\n"
    "ninja: build stopped: subcommand failed.\n"
)


def test_a_build_error_is_a_compile_error_with_the_compiler_s_first_error_lines():
    exc = RuntimeError(BUILD_LOG)
    assert classify(exc) == "compile_error"
    message = _describe(exc)
    assert message.splitlines() == [
        "Error building extension 'k':",
        "/d2k/work/.torch_extensions/k/main.cpp:6:24: error: cannot convert 'at::Tensor' to 'int'",
    ]


def test_a_worker_without_the_toolchain_is_the_worker_s_fault():
    assert classify(RuntimeError("Ninja is required to load C++ extensions")) == "worker_error"
    assert classify(OSError("CUDA_HOME environment variable is not set. Please set it")) == (
        "worker_error"
    )
    no_compiler = "Error building extension 'k': /bin/sh: 1: c++: not found\nninja: build stopped"
    assert classify(RuntimeError(no_compiler)) == "worker_error"
