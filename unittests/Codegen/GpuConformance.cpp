//===- GpuConformance.cpp - FP8 / NVFP4 conversions for a GPU run ---------===//
//
// Part of msac.
//
// msac-gpu-conformance: compiles the conversion kernels of the host unit
// tests (ConversionKernels.h: the E4M3 encode and decodes the caches and the
// weight dequantizer use, the exhaustive NVFP4 -> E4M3 table, and the
// NVFP4 -> bf16 and -> f16 cache decodes of the tensor-core kernels with
// nvvm.prmt byte lookups, the tile GEMM's E4M3 -> bf16 integer decode) for
// an NVIDIA target, and writes a bundle that
// bench/gpu_conformance.py runs on the GPU machine (which has no LLVM):
//
//   DIR/kernels.cubin   the kernels, `void NAME(ptr buffers, ptr scalars)`
//   DIR/cases.json      per kernel: its scalars and buffers, each an input
//                       file, or an output of N bytes with the file of its
//                       expected bytes and how to compare them
//   DIR/*.bin           inputs and expected outputs
//
// The expected outputs come from msac/Numerics/LowPrecision.h (written from
// msa-m3-spec.md §4, independent of the kernel builder's conversions), as in
// Fp8KernelTest.cpp. Every kernel runs as one thread (grid 1, block 1).
//
// Usage: msac-gpu-conformance --target sm_90a --cuda-toolkit DIR -o OUTDIR
//
//===----------------------------------------------------------------------===//

#include "ConversionKernels.h"
#include "msac/Codegen/Artifact.h"
#include "msac/Codegen/HostProgram.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <map>
#include <string>
#include <vector>

using namespace mlir;
using namespace msac;
using namespace msac::kernels;
using namespace msac::kernels::testing;

namespace cl = llvm::cl;

static cl::opt<std::string> targetName("target", cl::desc("NVIDIA target"),
                                       cl::init("sm_90a"));
static cl::opt<std::string> cudaToolkit("cuda-toolkit",
                                        cl::desc("CUDA toolkit folder (ptxas)"),
                                        cl::init("/usr/local/cuda"));
static cl::opt<std::string> outputDir("o", cl::desc("Bundle folder"),
                                      cl::Required);

namespace {

/// A kernel of the bundle: its buffers in order, as JSON, plus the files.
class Case {
public:
  explicit Case(std::string kernel) : kernel(std::move(kernel)) {}

  /// An input buffer holding `data`.
  template <typename T> void input(const std::vector<T> &data) {
    const std::string file = name() + ".bin";
    files.push_back({file, bytesOf(data)});
    buffers.push_back(llvm::json::Object{{"input", file}});
  }
  /// An output buffer whose expected contents are `want`, compared as
  /// `compare`: "bytes" (identical), "f32", "bf16" or "f16" (identical
  /// bits, or NaN where `want` is NaN).
  template <typename T>
  void output(const std::vector<T> &want, llvm::StringRef compare) {
    const std::string file = name() + ".expected.bin";
    files.push_back({file, bytesOf(want)});
    buffers.push_back(llvm::json::Object{
        {"output_bytes", static_cast<int64_t>(want.size() * sizeof(T))},
        {"expected", file},
        {"compare", compare}});
  }
  std::vector<int64_t> scalars = {0, 0, 0};

  llvm::json::Object json() const {
    llvm::json::Array b;
    for (const llvm::json::Object &o : buffers)
      b.push_back(llvm::json::Object(o));
    return llvm::json::Object{{"kernel", kernel},
                              {"scalars", llvm::json::Array(scalars)},
                              {"buffers", std::move(b)}};
  }
  std::string kernel;
  std::vector<std::pair<std::string, std::string>> files;

private:
  std::string name() const {
    return kernel + "." + std::to_string(buffers.size());
  }
  template <typename T> static std::string bytesOf(const std::vector<T> &v) {
    return std::string(reinterpret_cast<const char *>(v.data()),
                       v.size() * sizeof(T));
  }
  std::vector<llvm::json::Object> buffers;
};

/// The `fp8` kernel's buffers (emitFp8Kernel): encode of fp8EncodeInputs,
/// decodes of every byte, the NVFP4 -> E4M3 table.
Case fp8Case() {
  Case c("fp8");
  std::vector<float> in = fp8EncodeInputs();
  std::vector<uint8_t> encoded, bytes(256), table;
  std::vector<float> decoded(256);
  for (float x : in)
    encoded.push_back(numerics::floatToE4M3(x));
  for (int i = 0; i < 256; ++i) {
    bytes[i] = static_cast<uint8_t>(i);
    decoded[i] = numerics::e4m3ToFloat(bytes[i]);
  }
  for (int scale = 0; scale < 0x7F; ++scale)
    for (int code = 0; code < 16; ++code)
      table.push_back(numerics::floatToE4M3(
          numerics::e2m1ToFloat(static_cast<uint8_t>(code)) *
          numerics::e4m3ToFloat(static_cast<uint8_t>(scale))));
  c.scalars[0] = static_cast<int64_t>(in.size());
  c.input(in);
  c.output(encoded, "bytes");
  c.input(bytes);
  c.output(decoded, "f32");
  c.output(table, "bytes");
  c.output(decoded, "f32"); // the weight dequantizer's decoder
  return c;
}

/// The f16 bits of an FP32 value f16 holds exactly (NaN: 0x7E00), found
/// by search over every f16 pattern with LowPrecision.h's decoder (not
/// CacheDecode.h's exactF16Bits, which the kernels' table uses).
uint16_t f16BitsBySearch(float v) {
  if (std::isnan(v))
    return 0x7E00;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = numerics::f16ToFloat(static_cast<uint16_t>(h));
    if (f == v && std::signbit(f) == std::signbit(v))
      return static_cast<uint16_t>(h);
  }
  return 0x7E00; // not representable: cannot match a finite result
}

/// The `nvfp4bf16` (or with `f16` the `nvfp4f16`) kernel's buffers: every
/// code x every scale byte through the table (nvfp4BF16Table or
/// nvfp4F16Table) and the byte lookups, as bf16 (f16) pairs.
Case nvfp4Case(bool f16) {
  Case c(f16 ? "nvfp4f16" : "nvfp4bf16");
  const std::array<int32_t, 1024> table =
      f16 ? nvfp4F16Table() : nvfp4BF16Table();
  std::vector<int32_t> codes, scales;
  nvfp4QuadCases(codes, scales);
  std::vector<uint16_t> want;
  std::map<uint32_t, uint16_t> f16Bits; // by FP32 bits
  for (size_t n = 0; n < codes.size(); ++n)
    for (int i = 0; i < 4; ++i) {
      const int code = (codes[n] >> (4 * i)) & 15;
      const float v = numerics::e4m3ToFloat(numerics::floatToE4M3(
          numerics::e2m1ToFloat(static_cast<uint8_t>(code)) *
          numerics::e4m3ToFloat(static_cast<uint8_t>(scales[n]))));
      if (!f16) {
        want.push_back(std::isnan(v) ? uint16_t(0x7FC0)
                                     : numerics::floatToBF16(v));
        continue;
      }
      const uint32_t key = numerics::floatBits(v);
      auto it = f16Bits.find(key);
      if (it == f16Bits.end())
        it = f16Bits.emplace(key, f16BitsBySearch(v)).first;
      want.push_back(it->second);
    }
  const llvm::StringRef compare = f16 ? "f16" : "bf16";
  c.scalars[0] = static_cast<int64_t>(codes.size());
  c.input(std::vector<int32_t>(table.begin(), table.end()));
  c.input(codes);
  c.input(scales);
  c.output(want, compare);
  c.output(want, compare); // the 8-code decode of the attention kernels
  return c;
}

/// The `nvfp4e4m3` kernel's buffers: every code x every scale byte through
/// nvfp4E4M3Table and the byte lookups, as E4M3 bytes (NaN of either
/// sign where the reference is NaN: the "e4m3" comparison).
Case nvfp4E4M3Case() {
  Case c("nvfp4e4m3");
  const std::array<int32_t, kNvfp4E4M3TableWords> table = nvfp4E4M3Table();
  std::vector<int32_t> codes, scales;
  nvfp4QuadCases(codes, scales);
  std::vector<uint8_t> want;
  for (size_t n = 0; n < codes.size(); ++n)
    for (int i = 0; i < 4; ++i)
      want.push_back(numerics::floatToE4M3(
          numerics::e2m1ToFloat(
              static_cast<uint8_t>((codes[n] >> (4 * i)) & 15)) *
          numerics::e4m3ToFloat(static_cast<uint8_t>(scales[n]))));
  c.scalars[0] = static_cast<int64_t>(codes.size());
  c.input(std::vector<int32_t>(table.begin(), table.end()));
  c.input(codes);
  c.input(scales);
  c.output(want, "e4m3");
  return c;
}

/// The `e4m3bf16` kernel's buffers: every E4M3 byte through the tile
/// GEMM's integer decode, as bf16 bits (e4m3IntegerDecodeWant: the value,
/// +-480 for the NaN bytes), compared bit for bit.
Case e4m3BF16Case() {
  Case c("e4m3bf16");
  std::vector<uint8_t> bytes(256);
  std::vector<uint16_t> want(256);
  for (int i = 0; i < 256; ++i) {
    bytes[i] = static_cast<uint8_t>(i);
    want[i] = e4m3IntegerDecodeWant(bytes[i]);
  }
  c.input(bytes);
  c.output(want, "bytes");
  return c;
}

int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "msac-gpu-conformance")
      << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "msac-gpu-conformance (msac " << MSAC_VERSION << ")\n"
       << "  artifact format version: " << msac::kArtifactFormatVersion << "\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "msac-gpu-conformance: the FP8 / NVFP4 conversion kernels of the unit "
      "tests, compiled for an NVIDIA GPU, with inputs and expected outputs "
      "(run them with bench/gpu_conformance.py)\n");
  MLIRContext ctx;
  ctx.loadDialect<LLVM::LLVMDialect, NVVM::NVVMDialect, scf::SCFDialect,
                  math::MathDialect, arith::ArithDialect, func::FuncDialect>();
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  emitKernelFunction(b, loc, "fp8", emitFp8Kernel);
  // One body, two tables (the buffers differ): bf16 and f16 operands.
  for (const char *name : {"nvfp4bf16", "nvfp4f16"})
    emitKernelFunction(b, loc, name, [](KB &k) {
      emitNvfp4Bf16Kernel(k, [&](Value lo, Value hi, Value sel) -> Value {
        return NVVM::PermuteOp::create(
            k.b, k.loc, k.i32, lo, hi, sel,
            NVVM::PermuteModeAttr::get(k.b.getContext(),
                                       NVVM::PermuteMode::DEFAULT));
      });
    });

  emitKernelFunction(b, loc, "nvfp4e4m3", [](KB &k) {
    emitNvfp4E4M3Kernel(k, [&](Value lo, Value hi, Value sel) -> Value {
      return NVVM::PermuteOp::create(
          k.b, k.loc, k.i32, lo, hi, sel,
          NVVM::PermuteModeAttr::get(k.b.getContext(),
                                     NVVM::PermuteMode::DEFAULT));
    });
  });

  emitKernelFunction(b, loc, "e4m3bf16", [](KB &k) {
    emitE4M3BF16Kernel(k, [](KB &k, Value word) {
      return e4m3WordToBF16(
          k,
          [&](Value lo, Value hi, Value sel) -> Value {
            return NVVM::PermuteOp::create(
                k.b, k.loc, k.i32, lo, hi, sel,
                NVVM::PermuteModeAttr::get(k.b.getContext(),
                                           NVVM::PermuteMode::DEFAULT));
          },
          word);
    });
  });

  std::string cubin;
  std::string error = emitNvidiaBinary(*module, ModuleOp(), ModuleOp(),
                                       ModuleOp(), targetName, cudaToolkit,
                                       /*assembly=*/false, cubin);
  if (!error.empty())
    return fail(error);

  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
    return fail("cannot create " + outputDir + ": " + ec.message());
  auto write = [&](const std::string &file, llvm::StringRef data) {
    std::error_code ec;
    llvm::raw_fd_ostream os(outputDir + "/" + file, ec, llvm::sys::fs::OF_None);
    if (ec)
      return false;
    os << data;
    return true;
  };
  llvm::json::Array cases;
  for (const Case &c : {fp8Case(), nvfp4Case(false), nvfp4Case(true),
                        nvfp4E4M3Case(), e4m3BF16Case()}) {
    for (const auto &[file, data] : c.files)
      if (!write(file, data))
        return fail("cannot write " + outputDir + "/" + file);
    cases.push_back(c.json());
  }
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                   {"target", targetName},
                                   {"cubin", "kernels.cubin"},
                                   {"cases", std::move(cases)}}));
  if (!write("kernels.cubin", cubin) || !write("cases.json", json + "\n"))
    return fail("cannot write into " + outputDir);
  llvm::outs() << "msac-gpu-conformance: wrote " << outputDir << " ("
               << targetName << ", 5 kernels)\n";
  return 0;
}
