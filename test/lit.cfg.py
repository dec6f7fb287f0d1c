# -*- Python -*-
# lit configuration of the msac regression tests (test/).

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "MSAC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.msac_obj_root, "test")
# Unit/ has its own lit.site.cfg.py and becomes its own suite (GoogleTest);
# Inputs/ holds data, not tests.
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%msac_src_root", config.msac_src_root))
config.substitutions.append(("%msac_obj_root", config.msac_obj_root))
# The versions `--version` prints (CMake's project VERSION, LLVM's).
config.substitutions.append(("%msac_version", config.msac_version))
config.substitutions.append(("%llvm_version", config.llvm_version))

llvm_config.use_default_substitutions()
# `not`, `count` and FileCheck anywhere in a RUN line.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
# Fail on a FileCheck variable used outside its CHECK-LABEL block.
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

tool_dirs = [config.msac_tools_dir, config.llvm_tools_dir]
tools = ["msac", "msac-opt", "msac-run", "msac-synth", "msac-gpu-conformance",
         "MSACReferenceTests",
         "MSACRuntimeTests", "msac-host-check"]
# The libFuzzer target exists only in clang builds.
if os.path.exists(os.path.join(config.msac_tools_dir, "msac-safetensors-fuzzer")):
    tools.append("msac-safetensors-fuzzer")
    config.available_features.add("safetensors-fuzzer")
llvm_config.add_tool_substitutions([ToolSubst(t) for t in tools], tool_dirs)

# ptxas (CUDA toolkit) for NVIDIA code generation tests.
cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
if os.path.exists(os.path.join(cuda, "bin", "ptxas")):
    config.available_features.add("ptxas")
# cuobjdump (CUDA toolkit) shows the SASS of a cubin.
if os.path.exists(os.path.join(cuda, "bin", "cuobjdump")):
    config.available_features.add("cuobjdump")
    config.substitutions.append(
        ("%cuobjdump", os.path.join(cuda, "bin", "cuobjdump")))
# A GPU driver on this machine (never on CI).
if any(os.path.exists(os.path.join(d, "libcuda.so.1"))
       for d in ["/usr/lib/x86_64-linux-gnu", "/usr/local/nvidia/lib64", "/usr/lib64"]):
    config.available_features.add("cuda-driver")
