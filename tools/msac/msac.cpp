//===- msac.cpp - The msac compiler driver --------------------------------===//
//
// Part of msac.
//
//   msac import MODEL_DIR [-o FILE] [--kv-cache-dtype D] [--index-cache-dtype
//   D]
//       Checks the checkpoint (every problem listed) and prints the MiniMax-M3
//       text model in the msa/bsq dialects.
//   msac compile MODEL_DIR -o ARTIFACT [--target T,...] [...]
//       Compiles the model to an artifact for msac-run.
//   import and compile take --quantize-weights=RECIPE (nvfp4-experts, mxfp8,
//   fp8, fp8-tensor): a bf16 checkpoint's projections are quantized on the way
//   in, as a ModelOpt checkpoint stores them (ckpt::quantizeCheckpointWeights);
//   and --attention-precision exact|q8 (the attention ops' products: q8 is
//   MSA's FP8 decode contract, msa-m3-spec §3.2, with FP8 or NVFP4 KV caches).
//   msac plan MODEL_DIR [--kv-cache-dtype D] [--index-cache-dtype D]
//                       [--max-seq-len N] [--memory SIZE] [--json]
//                       [--quantize-weights RECIPE] [--attention-precision P]
//       Parameters, weight bytes (quantized with RECIPE when given),
//       KV/index-cache bytes per token, and how many sequences fit in a
//       cache budget.
//
// Exit status: 0 success, 1 problems in the model folder, 2 bad usage.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/Checkpoint.h"
#include "msac/Checkpoint/MemoryPlan.h"
#include "msac/Checkpoint/ModelConfig.h"
#include "msac/Checkpoint/ModelWeights.h"
#include "msac/Checkpoint/QuantizeWeights.h"
#include "msac/Checkpoint/TokenizerCheck.h"
#include "msac/Codegen/Artifact.h"
#include "msac/Codegen/HostProgram.h"
#include "msac/Codegen/TargetTable.h"
#include "msac/Dialect/MSA/IR/MSAOps.h"
#include "msac/Import/M3Importer.h"
#include "msac/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>

using namespace llvm;
using namespace msac;

static cl::OptionCategory msacCategory("msac options");

static cl::SubCommand importCommand("import",
                                    "Check a checkpoint folder and print its "
                                    "model in the msa dialect");
static cl::SubCommand
    compileCommand("compile",
                   "Compile a checkpoint folder to an artifact for msac-run");
static cl::SubCommand
    planCommand("plan", "Report weight and KV-cache memory of a model folder");

static cl::opt<std::string> importDir(cl::Positional, cl::Required,
                                      cl::desc("<model-dir>"),
                                      cl::sub(importCommand),
                                      cl::cat(msacCategory));
static cl::opt<std::string> planDir(cl::Positional, cl::Required,
                                    cl::desc("<model-dir>"),
                                    cl::sub(planCommand),
                                    cl::cat(msacCategory));
static cl::opt<std::string> compileDir(cl::Positional, cl::Required,
                                       cl::desc("<model-dir>"),
                                       cl::sub(compileCommand),
                                       cl::cat(msacCategory));
static cl::opt<std::string> outputFile(
    "o",
    cl::desc("Output: IR file for import (default: -), artifact folder "
             "for compile"),
    cl::value_desc("path"), cl::init("-"), cl::sub(importCommand),
    cl::sub(compileCommand), cl::cat(msacCategory));
static cl::list<std::string> targets(
    "target",
    cl::desc("Targets, comma separated: host, sm_90a, sm_100a (default: host)"),
    cl::CommaSeparated, cl::sub(compileCommand), cl::cat(msacCategory));
static cl::list<std::string> genericGpuOps(
    "gpu-generic-ops",
    cl::desc("Ops (e.g. msa.moe_experts) to run on GPUs as grid-stride loops "
             "of their host kernels instead of their GPU kernels (debugging)"),
    cl::CommaSeparated, cl::Hidden, cl::sub(compileCommand),
    cl::cat(msacCategory));
static cl::opt<bool> wideTiles(
    "wgmma-wide-tiles",
    cl::desc("sm_90a: run the tile GEMMs of msa.linear, the LM head and the "
             "fused attention prologue on CTAs of two warpgroups sharing the "
             "weight tile (128-token tiles, dynamic shared memory) when a "
             "step makes enough such tiles (default on; "
             "--wgmma-wide-tiles=false keeps one-warpgroup tiles)"),
    cl::init(true), cl::sub(compileCommand), cl::cat(msacCategory));
static cl::opt<bool> packedWeights(
    "packed-weights",
    cl::desc("Keep block-scaled projection and expert weights (NVFP4, MXFP8, "
             "FP8) packed on the device: the linear and MoE kernels read "
             "payload and scales and dequantize in registers (default on; "
             "--packed-weights=false dequantizes them to FP32 copies at "
             "load)"),
    cl::init(true), cl::sub(compileCommand), cl::cat(msacCategory));
static cl::opt<bool> stripWeights(
    "strip-weights",
    cl::desc("Leave the weights out of the artifact (weights.bin is not "
             "written); for benchmarks with msac-run bench-decode "
             "--dummy-weights"),
    cl::init(false), cl::sub(compileCommand), cl::cat(msacCategory));
static cl::opt<bool> fuseAttentionPrologue(
    "fuse-attention-prologue",
    cl::desc("Fuse each layer's QKV projections, Q/K norms, RoPE and cache "
             "inserts into one msa.attention_prologue kernel "
             "(-msa-fuse-attention-prologue; on sm_90a a tile GEMM with "
             "the norms, RoPE and inserts in its epilogue for heads of 128 "
             "channels and bf16 weights, matrix-vector products reading "
             "block-scaled weights in place; layers the pass does not "
             "match stay unfused; "
             "default on, except that with a GPU target a model whose fused "
             "prologue has no GPU kernel of its own (heads other than 128 "
             "channels) stays unfused unless the flag is given; "
             "--fuse-attention-prologue=false keeps every layer unfused)"),
    cl::init(true), cl::sub(compileCommand), cl::cat(msacCategory));
static cl::opt<bool> ptxasFmad(
    "ptxas-fmad",
    cl::desc("Let ptxas contract multiply-adds into FMAs (default true)"),
    cl::init(true), cl::sub(compileCommand), cl::cat(msacCategory));
static cl::opt<std::string>
    cudaToolkit("cuda-toolkit", cl::desc("CUDA toolkit holding bin/ptxas"),
                cl::init("/usr/local/cuda"), cl::sub(compileCommand),
                cl::cat(msacCategory));
enum class EmitStage { Msa, Kernels, LLVM, PTX, Artifact };
/// cl::parser for --emit whose error lists the stages (LLVM's names none).
struct EmitStageParser : cl::parser<EmitStage> {
  using cl::parser<EmitStage>::parser;
  bool parse(cl::Option &option, StringRef name, StringRef arg,
             EmitStage &value) {
    std::string names;
    for (unsigned i = 0, e = getNumOptions(); i != e; ++i) {
      if (getOption(i) == arg) {
        value = Values[i].V.getValue();
        return false;
      }
      names += (names.empty() ? "" : ", ") + getOption(i).str();
    }
    return option.error("'" + arg + "' is not a stage; use one of " + names);
  }
};
static cl::opt<EmitStage, false, EmitStageParser>
    emit("emit", cl::desc("Stop after a stage and print its IR"),
         cl::values(clEnumValN(EmitStage::Msa, "msa", "the imported msa IR"),
                    clEnumValN(EmitStage::Kernels, "kernels",
                               "the host kernels (scf/arith/math/llvm)"),
                    clEnumValN(EmitStage::LLVM, "llvm",
                               "the host kernels in the LLVM dialect"),
                    clEnumValN(EmitStage::PTX, "ptx",
                               "PTX of the first NVIDIA target"),
                    clEnumValN(EmitStage::Artifact, "artifact",
                               "the artifact folder (default)")),
         cl::init(EmitStage::Artifact), cl::sub(compileCommand),
         cl::cat(msacCategory));
static cl::opt<std::string>
    lldPath("lld", cl::desc("ld.lld used to link the host kernels"),
            cl::init("/usr/lib/llvm-22/bin/ld.lld"), cl::sub(compileCommand),
            cl::cat(msacCategory));
static cl::opt<std::string>
    kvCacheDType("kv-cache-dtype",
                 cl::desc("KV-cache element format: bf16, fp8, nvfp4"),
                 cl::init("bf16"), cl::sub(importCommand), cl::sub(planCommand),
                 cl::sub(compileCommand), cl::cat(msacCategory));
static cl::opt<std::string> indexCacheDType(
    "index-cache-dtype",
    cl::desc("Index-key cache element format: bf16, fp8, nvfp4"),
    cl::init("bf16"), cl::sub(importCommand), cl::sub(planCommand),
    cl::sub(compileCommand), cl::cat(msacCategory));
static cl::opt<std::string> attentionPrecision(
    "attention-precision",
    cl::desc("Precision contract of the attention products: exact (cached "
             "values as stored, FP32 probabilities; default) or q8 (MSA's "
             "FP8 decode contract: E4M3 queries, E4M3(448 P) in P V; needs "
             "--kv-cache-dtype fp8 or nvfp4)"),
    cl::value_desc("contract"), cl::init("exact"), cl::sub(importCommand),
    cl::sub(compileCommand), cl::sub(planCommand), cl::cat(msacCategory));
static cl::opt<bool> gpuQ8Unchecked(
    "gpu-attention-q8-unchecked",
    cl::desc("Compile --attention-precision q8 for NVIDIA targets although "
             "their attention kernels do not follow the contract's running "
             "maximum (experiments only; docs/perf.md, fortieth session)"),
    cl::init(false), cl::Hidden, cl::sub(compileCommand),
    cl::cat(msacCategory));
static cl::opt<std::string> quantizeWeights(
    "quantize-weights",
    cl::desc("Quantize a bf16/f16/f32 checkpoint's projection weights as a "
             "ModelOpt checkpoint stores them: nvfp4-experts (routed "
             "experts NVFP4, other projections MXFP8; M3.1-Flash), mxfp8, "
             "fp8 (block FP8, 128 x 128 tiles), fp8-tensor (per-tensor "
             "FP8). Embedding, norms, router "
             "and LM head stay as stored"),
    cl::value_desc("recipe"), cl::init(""), cl::sub(importCommand),
    cl::sub(compileCommand), cl::sub(planCommand), cl::cat(msacCategory));
static cl::opt<int64_t> maxSeqLen(
    "max-seq-len",
    cl::desc("Sequence length to plan for (default: max_position_embeddings)"),
    cl::init(-1), cl::sub(planCommand), cl::cat(msacCategory));
static cl::opt<std::string>
    memory("memory",
           cl::desc("Cache memory budget, e.g. 80GiB or 141GB (default: none)"),
           cl::init(""), cl::sub(planCommand), cl::cat(msacCategory));
static cl::opt<bool> planJson("json", cl::desc("Print the plan as JSON"),
                              cl::sub(planCommand), cl::cat(msacCategory));

namespace {

int usageError(const Twine &message) {
  WithColor::error(errs(), "msac") << message << "\n";
  return 2;
}

/// Usage error (2) when a single-value option of `command` (a cl::opt:
/// zero or one occurrence; lists take several) was given more than once
/// (LLVM's parser keeps the last value silently), else 0. The first such
/// option by name is reported.
int repeatedOptionError(const cl::SubCommand &command) {
  SmallVector<StringRef> repeated;
  for (const auto &[name, option] : command.OptionsMap)
    if (option->getNumOccurrencesFlag() == cl::Optional &&
        option->getNumOccurrences() > 1)
      repeated.push_back(name);
  if (repeated.empty())
    return 0;
  llvm::sort(repeated);
  return usageError((repeated.front().size() == 1 ? "-" : "--") +
                    repeated.front() +
                    " is given more than once; give it once");
}

void printDiagnostics(const ckpt::Diagnostics &diags) {
  std::ostringstream os;
  diags.print(os);
  errs() << os.str();
}

std::optional<ckpt::CacheDType> cacheDType(const cl::opt<std::string> &flag) {
  return ckpt::parseCacheDType(flag.getValue());
}

/// The usage error for a --kv-cache-dtype or --index-cache-dtype value that
/// names no cache format (the first such flag).
int cacheDTypeError() {
  const cl::opt<std::string> &bad =
      cacheDType(kvCacheDType) ? indexCacheDType : kvCacheDType;
  return usageError("--" + bad.ArgStr + " '" + bad.getValue() +
                    "' is not a cache format; use bf16, fp8 or nvfp4");
}

/// The --attention-precision contract, or nullopt after printing the usage
/// error for a value that names none or a q8 contract over a BF16 KV
/// cache (`kv`).
std::optional<msa::AttentionPrecision>
attentionPrecisionOf(ckpt::CacheDType kv) {
  std::optional<msa::AttentionPrecision> precision =
      msa::symbolizeAttentionPrecision(attentionPrecision.getValue());
  if (!precision) {
    usageError("--attention-precision '" + attentionPrecision.getValue() +
               "' is not a precision contract; use exact or q8");
    return std::nullopt;
  }
  if (*precision == msa::AttentionPrecision::Q8 &&
      kv == ckpt::CacheDType::BF16) {
    usageError("--attention-precision q8 needs --kv-cache-dtype fp8 or nvfp4 "
               "(the Q8KV8 / Q8KV4 contracts multiply E4M3 keys and "
               "values); the KV cache is bf16");
    return std::nullopt;
  }
  return precision;
}

/// Checks that `dir` may receive a new artifact: absent, empty, or an
/// earlier artifact (one holding manifest.json), which commitArtifact
/// replaces whole once the new one is complete. Refuses a non-empty folder
/// that is not an artifact, a file, and a path whose parent folder does
/// not exist. Returns 0 or the exit code after
/// printing the error.
int checkArtifactDir(const std::string &dir) {
  if (!sys::fs::exists(dir)) {
    // Like other compilers' -o: the folder it goes into must exist.
    StringRef parent = sys::path::parent_path(dir);
    if (!parent.empty() && !sys::fs::is_directory(parent))
      return usageError("-o " + dir + ": the folder " + parent.str() +
                        " does not exist; create it first or choose another "
                        "-o");
    return 0;
  }
  if (!sys::fs::is_directory(dir))
    return usageError("-o " + dir +
                      " is a file; the artifact is a folder, choose another "
                      "-o");
  std::error_code ec;
  sys::fs::directory_iterator it(dir, ec), end;
  if (it == end)
    return 0;
  if (!sys::fs::exists(dir + "/manifest.json"))
    return usageError("-o " + dir +
                      " is a non-empty folder without manifest.json (not an "
                      "msac artifact); choose another -o or empty it");
  return 0;
}

/// Refuses an -o file that already exists inside the checkpoint folder
/// `modelDir` (its config.json, a safetensors shard, the tokenizer): the
/// IR or PTX written there would destroy the input. Returns 0 or the exit
/// code after printing the error.
int checkOutputOutsideModel(const std::string &modelDir) {
  if (outputFile == "-" || !sys::fs::is_regular_file(outputFile))
    return 0;
  SmallString<256> out, model;
  if (sys::fs::real_path(outputFile, out) ||
      sys::fs::real_path(modelDir, model))
    return 0;
  if (!StringRef(out).starts_with((model + "/").str()))
    return 0;
  return usageError("-o " + outputFile + " is a file of the checkpoint " +
                    modelDir +
                    ", which the output would overwrite; choose "
                    "another -o");
}

/// The folder a compile writes before commitArtifact moves it to `dir`: a
/// sibling named after the process, so that an earlier artifact survives
/// a failed or interrupted compile and a retry is never blocked.
std::string stagingDir(const std::string &dir) {
  return dir + ".partial-" + std::to_string(sys::Process::getProcessId());
}

/// Replaces `dir` (absent, empty or an earlier artifact: checkArtifactDir)
/// with the complete artifact in `staging`. Returns an error message or "".
std::string commitArtifact(const std::string &staging, const std::string &dir) {
  if (sys::fs::exists(dir))
    if (std::error_code ec = sys::fs::remove_directories(dir))
      return "cannot replace the artifact " + dir + ": " + ec.message() +
             "; the new one is in " + staging;
  if (std::error_code ec = sys::fs::rename(staging, dir))
    return "cannot move the new artifact from " + staging + " to " + dir +
           ": " + ec.message();
  return "";
}

bool hasTensors(const std::string &dir) {
  std::error_code ec;
  for (sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    if (StringRef(it->path()).ends_with(".safetensors"))
      return true;
  return false;
}

/// A model folder must exist and be a directory.
bool checkModelDir(const std::string &dir) {
  if (!sys::fs::exists(dir)) {
    WithColor::error(errs(), "msac") << dir << ": no such model folder\n";
    return false;
  }
  if (!sys::fs::is_directory(dir)) {
    WithColor::error(errs(), "msac")
        << dir << ": is a file; pass the checkpoint folder that holds "
        << "config.json and the safetensors shards\n";
    return false;
  }
  if (!sys::fs::exists(dir + "/config.json") &&
      sys::fs::exists(dir + "/manifest.json")) {
    WithColor::error(errs(), "msac")
        << dir << ": is an msac artifact (manifest.json), not a checkpoint; "
        << "pass the checkpoint folder that holds config.json and the "
        << "safetensors shards (run artifacts with msac-run)\n";
    return false;
  }
  return true;
}

/// A checkpoint folder that passed every check.
struct LoadedModel {
  std::optional<ckpt::ModelConfig> config;
  std::unique_ptr<ckpt::Checkpoint> checkpoint;
  std::optional<ckpt::ModelWeights> weights;
};

/// The recipe of --quantize-weights, nullopt when the flag is absent; prints
/// the usage error and sets `bad` for an unknown recipe.
std::optional<ckpt::WeightRecipe> weightRecipe(bool &bad) {
  bad = false;
  if (quantizeWeights.getNumOccurrences() == 0)
    return std::nullopt;
  std::optional<ckpt::WeightRecipe> recipe =
      ckpt::parseWeightRecipe(quantizeWeights.getValue());
  if (!recipe) {
    bad = true;
    usageError("--quantize-weights '" + quantizeWeights + "' is not a recipe; " +
               "use one of " + ckpt::weightRecipeList());
  }
  return recipe;
}

/// Reads config, shards and weights of `dir` (quantizing the weights with
/// `recipe` when given), prints every diagnostic, and returns null (after
/// "N problem(s) found; nothing was <verb>") when any error was found.
std::unique_ptr<LoadedModel>
loadModel(const std::string &dir, const char *verb,
          std::optional<ckpt::WeightRecipe> recipe) {
  auto model = std::make_unique<LoadedModel>();
  ckpt::Diagnostics diags, shardDiags;
  model->config = ckpt::readModelConfig(dir, diags);
  if (model->config)
    model->checkpoint = ckpt::Checkpoint::open(dir, shardDiags);
  if (recipe && model->checkpoint && !diags.hasErrors() &&
      !shardDiags.hasErrors())
    ckpt::quantizeCheckpointWeights(*model->config, *model->checkpoint, *recipe,
                                    diags);
  // Unreadable shards would make every tensor look missing: report them
  // alone. Problems of readable shards (a hole in the data) come after
  // the tensors the config misses, the likelier cause.
  if (model->checkpoint && !diags.hasErrors() &&
      model->checkpoint->allShardsRead())
    model->weights =
        ckpt::resolveWeights(*model->config, *model->checkpoint, diags);
  // An unsupported tokenizer only warns: kernels and benchmarks need none.
  if (sys::fs::exists(dir + "/tokenizer.json"))
    ckpt::checkTokenizer(dir + "/tokenizer.json", diags);
  printDiagnostics(diags);
  printDiagnostics(shardDiags);
  const size_t problems = diags.errorCount() + shardDiags.errorCount();
  if (!model->weights || problems) {
    WithColor::error(errs(), "msac")
        << dir << ": " << problems << " problem(s) found; nothing was " << verb
        << "\n";
    return nullptr;
  }
  return model;
}

/// Warns when the checkpoint names the KV-cache format it was calibrated
/// for (ModelOpt `kv_cache_quant_algo`) and --kv-cache-dtype differs.
void noteCheckpointKVFormat(const ckpt::ModelConfig &config,
                            ckpt::CacheDType kv) {
  std::string algo = config.quantization.kvCacheAlgorithm;
  for (char &c : algo)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (algo.empty() || algo == ckpt::cacheDTypeName(kv))
    return;
  std::string flag = algo == "fp8" || algo == "nvfp4"
                         ? "pass --kv-cache-dtype " + algo + " to follow it"
                         : "msac's KV caches are bf16, fp8 or nvfp4";
  WithColor::warning(errs(), "msac")
      << config.quantization.source << ": kv_cache_quant_algo is "
      << config.quantization.kvCacheAlgorithm
      << " (the KV-cache format the checkpoint was calibrated for), but the "
         "KV cache is "
      << ckpt::cacheDTypeName(kv) << "; " << flag << "\n";
}

int runImport() {
  if (int rc = repeatedOptionError(importCommand))
    return rc;
  if (!checkModelDir(importDir))
    return 1;
  if (outputFile.empty())
    return usageError("-o is empty; give the output path, or - for stdout");
  auto kv = cacheDType(kvCacheDType), index = cacheDType(indexCacheDType);
  if (!kv || !index)
    return cacheDTypeError();
  std::optional<msa::AttentionPrecision> precision = attentionPrecisionOf(*kv);
  if (!precision)
    return 2;
  bool badRecipe;
  std::optional<ckpt::WeightRecipe> recipe = weightRecipe(badRecipe);
  if (badRecipe)
    return 2;
  if (int rc = checkOutputOutsideModel(importDir))
    return rc;
  std::unique_ptr<LoadedModel> model = loadModel(importDir, "imported", recipe);
  if (!model)
    return 1;
  std::string problem = ckpt::checkCacheDTypes(*model->config, *kv, *index);
  noteCheckpointKVFormat(*model->config, *kv);
  if (!problem.empty())
    return usageError(importDir + "/config.json: " + problem);

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = importModel(
      context, *model->config, *model->weights, {*kv, *index, *precision});
  if (!module) {
    WithColor::error(errs(), "msac")
        << "internal error: the imported module does not verify\n";
    return 3;
  }
  std::error_code ec;
  ToolOutputFile out(outputFile, ec, sys::fs::OF_None);
  if (ec)
    return usageError("cannot open " + outputFile + ": " + ec.message());
  module->print(out.os());
  out.keep();
  return 0;
}

void progress(int step, int total, const Twine &what) {
  errs() << "[" << step << "/" << total << "] " << what << "\n";
}

int runCompile() {
  if (int rc = repeatedOptionError(compileCommand))
    return rc;
  std::vector<std::string> wanted(targets.begin(), targets.end());
  if (wanted.empty())
    wanted.push_back("host");
  bool host = false;
  std::vector<const GpuTarget *> gpus;
  for (const std::string &t : wanted) {
    if (t == "host") {
      if (host)
        return usageError("--target 'host' is listed twice");
      host = true;
      continue;
    }
    const GpuTarget *gpu = lookupGpuTarget(t);
    if (!gpu)
      return usageError("--target '" + t +
                        "' is not a known target; use host, sm_90a or "
                        "sm_100a (comma-separated for several)");
    if (gpu->vendor != "nvidia")
      return usageError("--target '" + t +
                        "' is not available yet (the AMD backend is to "
                        "come); use host, sm_90a or sm_100a");
    if (std::find_if(gpus.begin(), gpus.end(), [&](const GpuTarget *g) {
          return g == gpu;
        }) != gpus.end())
      return usageError("--target '" + t + "' is listed twice");
    gpus.push_back(gpu);
  }
  auto kv = cacheDType(kvCacheDType), index = cacheDType(indexCacheDType);
  if (!kv || !index)
    return cacheDTypeError();
  std::optional<msa::AttentionPrecision> precision = attentionPrecisionOf(*kv);
  if (!precision)
    return 2;
  // The sm_90a / sm_100a attention kernels keep their running maximum per
  // 16 keys and per split-KV chunk, where the q8 contract rounds E4M3(448 P)
  // against the maximum of each block's scores: on an H100 their outputs
  // were up to 4% of the largest value off the contract's (bench/
  // m3_ops_check.py, bound 1.6%), and msac-host-check failed.
  if (*precision == msa::AttentionPrecision::Q8 && !gpus.empty() &&
      !gpuQ8Unchecked)
    return usageError(
        "--attention-precision q8 runs on --target host only for now: the "
        "NVIDIA attention kernels do not yet round P against the block "
        "maxima the contract names (their outputs differ from it by up to 4% "
        "of the largest value, docs/perf.md); compile NVIDIA targets with "
        "--attention-precision exact");
  if (!gpus.empty() && !sys::fs::can_execute(cudaToolkit + "/bin/ptxas"))
    return usageError("--cuda-toolkit '" + cudaToolkit +
                      "' has no bin/ptxas, which NVIDIA targets need; point "
                      "it at a CUDA toolkit (default /usr/local/cuda)");
  bool badRecipe;
  std::optional<ckpt::WeightRecipe> recipe = weightRecipe(badRecipe);
  if (badRecipe)
    return 2;
  if (!checkModelDir(compileDir))
    return 1;
  if (emit == EmitStage::Artifact && outputFile == "-")
    return usageError("compile needs -o ARTIFACT_DIR (e.g. -o model.msa)");
  if (outputFile.empty())
    return usageError("-o is empty; give the output path (e.g. -o model.msa)");
  if (emit == EmitStage::PTX && gpus.empty())
    return usageError("--emit=ptx needs an NVIDIA --target (sm_90a, sm_100a)");
  if (emit == EmitStage::Artifact)
    if (int rc = checkArtifactDir(outputFile))
      return rc;
  if (emit != EmitStage::Artifact)
    if (int rc = checkOutputOutsideModel(compileDir))
      return rc;
  // Artifacts are written to a staging folder, removed unless committed.
  const std::string staging = stagingDir(outputFile);
  bool committed = false;
  llvm::scope_exit dropStaging([&] {
    if (emit == EmitStage::Artifact && !committed && sys::fs::exists(staging))
      sys::fs::remove_directories(staging);
  });
  auto commit = [&]() -> int {
    if (std::string error = commitArtifact(staging, outputFile);
        !error.empty()) {
      WithColor::error(errs(), "msac") << error << "\n";
      return 1;
    }
    committed = true;
    return 0;
  };
  // Checking, importing, generating, one compile per target, writing.
  const int steps = 4 + static_cast<int>(gpus.size()) + (host ? 1 : 0);
  int step = 0;
  progress(++step, steps, "checking " + compileDir);
  std::unique_ptr<LoadedModel> model =
      loadModel(compileDir, "compiled", recipe);
  if (!model)
    return 1;
  // After the config's own errors, which matter more.
  if (emit == EmitStage::Artifact &&
      !sys::fs::exists(compileDir + "/tokenizer.json"))
    WithColor::warning(errs(), "msac")
        << compileDir
        << "/tokenizer.json not found: the artifact can be inspected and "
           "benchmarked, but `msac-run generate` needs the checkpoint's "
           "tokenizer.json\n";
  std::string problem = ckpt::checkCacheDTypes(*model->config, *kv, *index);
  noteCheckpointKVFormat(*model->config, *kv);
  if (!problem.empty())
    return usageError(compileDir + "/config.json: " + problem);
  progress(++step, steps, "importing the model to the msa dialect");
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = importModel(
      context, *model->config, *model->weights, {*kv, *index, *precision});
  if (!module)
    return 3;
  auto print = [&](mlir::Operation *op) {
    std::error_code ec;
    ToolOutputFile out(outputFile, ec, sys::fs::OF_None);
    if (ec)
      return usageError("cannot open " + outputFile + ": " + ec.message());
    op->print(out.os());
    out.keep();
    return 0;
  };
  if (emit == EmitStage::Msa)
    return print(*module);
  progress(++step, steps,
           std::string("generating ") +
               (!host          ? "GPU kernels"
                : gpus.empty() ? "host kernels"
                               : "host and GPU kernels") +
               " and the launch schedule");
  // Block-scaled projections become FP32 dequantization + msa.linear; then
  // the attention prologues are fused (unless
  // --fuse-attention-prologue=false).
  auto lower = [&](bool fuse) {
    mlir::PassManager pm(&context);
    buildReferencePipeline(pm);
    if (fuse)
      pm.addPass(createMSAFuseAttentionPrologue());
    return pm.run(*module);
  };
  if (failed(lower(fuseAttentionPrologue)))
    return 3;
  // By default a GPU target keeps the fusion only when the GPU kernels take
  // the fused op (heads of 128 channels, ...): elsewhere it would run as
  // the grid-stride host body, slower than the unfused kernels.
  if (fuseAttentionPrologue && fuseAttentionPrologue.getNumOccurrences() == 0 &&
      !gpus.empty()) {
    bool generic = false;
    module->walk([&](msa::AttentionPrologueOp op) {
      if (!hasSpecificGpuKernel(op))
        generic = true;
    });
    if (generic) {
      WithColor::note(errs(), "msac")
          << "the fused attention prologue has no GPU kernel for this "
             "model's shapes or weight formats (heads of 128 channels; "
             "bf16 weights, or every projection in one block-scaled "
             "format); compiling it unfused (--fuse-attention-prologue "
             "fuses anyway)\n";
      module = importModel(context, *model->config, *model->weights,
                           {*kv, *index, *precision});
      if (!module || failed(lower(false)))
        return 3;
    }
  }
  mlir::FailureOr<HostProgram> program = buildHostProgram(
      *module,
      std::vector<std::string>(genericGpuOps.begin(), genericGpuOps.end()),
      wideTiles, packedWeights, llvm::any_of(gpus, [](const GpuTarget *g) {
        return g->name == "sm_90a";
      }));
  if (failed(program))
    return 1;
  if (emit == EmitStage::Kernels)
    return print(*program->kernels);
  std::vector<ArtifactTarget> written;
  if (emit == EmitStage::PTX) {
    std::string ptx;
    std::string error = emitNvidiaBinary(
        *program->kernels, *program->gpuKernels, *program->wgmmaKernels,
        *program->e2m1Kernels, gpus.front()->name.str(), cudaToolkit,
        /*assembly=*/true, ptx);
    if (!error.empty()) {
      WithColor::error(errs(), "msac") << error << "\n";
      return 1;
    }
    std::error_code ec;
    ToolOutputFile out(outputFile, ec, sys::fs::OF_None);
    if (ec)
      return usageError("cannot open " + outputFile + ": " + ec.message());
    out.os() << ptx;
    out.keep();
    return 0;
  }
  if (emit == EmitStage::Artifact) {
    if (std::error_code ec = sys::fs::create_directories(staging + "/kernels"))
      return usageError("cannot create " + staging + ": " + ec.message());
    for (const GpuTarget *gpu : gpus) {
      progress(++step, steps,
               "compiling " + Twine(program->kernelNames.size()) +
                   " kernels for " + gpu->name);
      std::string cubin;
      std::vector<KernelGeometry> geometry;
      std::string error = emitNvidiaBinary(
          *program->kernels, *program->gpuKernels, *program->wgmmaKernels,
          *program->e2m1Kernels, gpu->name.str(), cudaToolkit, false, cubin,
          ptxasFmad, &geometry);
      if (!error.empty()) {
        WithColor::error(errs(), "msac") << error << "\n";
        return 1;
      }
      std::string file = "kernels/" + gpu->name.str() + ".cubin";
      std::error_code ec;
      raw_fd_ostream out(staging + "/" + file, ec, sys::fs::OF_None);
      if (ec)
        return usageError("cannot write " + file + ": " + ec.message());
      out << cubin;
      written.push_back({gpu->name.str(), file,
                         gpu->multiprocessors * kGpuCtasPerSM,
                         gpu->threadsPerBlock, std::move(geometry)});
    }
    if (!host) {
      progress(++step, steps,
               (stripWeights ? "writing the manifest (weights stripped) to "
                             : "writing weights and manifest to ") +
                   outputFile);
      std::string error =
          writeArtifact(staging, *program, written, *model->config,
                        *model->checkpoint, compileDir, stripWeights);
      if (!error.empty()) {
        WithColor::error(errs(), "msac") << error << "\n";
        return 1;
      }
      if (int rc = commit())
        return rc;
      outs() << "msac: wrote " << outputFile << " ("
             << program->kernelNames.size() << " kernels, "
             << program->schedule.size() << " launches per step)\n";
      return 0;
    }
  }
  if (failed(lowerKernelsToLLVM(*program->kernels))) {
    WithColor::error(errs(), "msac") << "lowering the kernels to LLVM failed\n";
    return 3;
  }
  if (emit == EmitStage::LLVM)
    return print(*program->kernels);
  progress(++step, steps,
           "compiling " + Twine(program->kernelNames.size()) +
               " kernels for x86-64");
  std::string error = emitHostSharedObject(
      *program->kernels, staging + "/kernels/host-x86_64.so", lldPath);
  if (!error.empty()) {
    WithColor::error(errs(), "msac") << error << "\n";
    return 1;
  }
  progress(++step, steps,
           (stripWeights ? "writing the manifest (weights stripped) to "
                         : "writing weights and manifest to ") +
               outputFile);
  written.insert(written.begin(),
                 {"host-x86_64", "kernels/host-x86_64.so", 0, 0, {}});
  error = writeArtifact(staging, *program, written, *model->config,
                        *model->checkpoint, compileDir, stripWeights);
  if (!error.empty()) {
    WithColor::error(errs(), "msac") << error << "\n";
    return 1;
  }
  if (int rc = commit())
    return rc;
  outs() << "msac: wrote " << outputFile << " (" << program->kernelNames.size()
         << " kernels, " << program->schedule.size() << " launches per step)\n";
  return 0;
}

int runPlan() {
  if (int rc = repeatedOptionError(planCommand))
    return rc;
  if (!checkModelDir(planDir))
    return 1;
  auto kv = cacheDType(kvCacheDType), index = cacheDType(indexCacheDType);
  if (!kv || !index)
    return cacheDTypeError();
  // Accepted (and checked) so that a compile command line plans as is; the
  // contract changes no memory.
  if (!attentionPrecisionOf(*kv))
    return 2;
  std::optional<uint64_t> budget = uint64_t(0);
  if (!memory.empty() && !(budget = ckpt::parseByteSize(memory.getValue())))
    return usageError("--memory '" + memory +
                      "' is not a positive byte size below 4 EiB (e.g. "
                      "80GiB, 141GB)");
  if (maxSeqLen != -1 && (maxSeqLen < 1 || maxSeqLen > (int64_t(1) << 32)))
    return usageError("--max-seq-len must be in [1, 2^32]");
  // A bare number is bytes; a budget below 1 MiB is surely a missing unit
  // (or, with a unit, too small to hold any model).
  if (!memory.empty() && *budget < (uint64_t(1) << 20)) {
    const bool bare =
        memory.getValue().find_first_not_of("0123456789") == std::string::npos;
    return usageError("--memory '" + memory + "' is " +
                      std::to_string(*budget) + " bytes; " +
                      (bare ? "give a unit (e.g. 80GiB, 141GB)"
                            : "a device needs at least 1 MiB (e.g. 80GiB, "
                              "141GB)"));
  }

  bool badRecipe;
  std::optional<ckpt::WeightRecipe> recipe = weightRecipe(badRecipe);
  if (badRecipe)
    return 2;

  ckpt::Diagnostics diags, shardDiags;
  std::optional<ckpt::ModelConfig> config =
      ckpt::readModelConfig(planDir, diags);
  std::optional<ckpt::ModelWeights> weights;
  std::unique_ptr<ckpt::Checkpoint> checkpoint;
  if (config && hasTensors(planDir)) {
    // As loadModel: the missing tensors first, then the shards' problems.
    checkpoint = ckpt::Checkpoint::open(planDir, shardDiags);
    if (checkpoint && !diags.hasErrors() && checkpoint->allShardsRead())
      weights = ckpt::resolveWeights(*config, *checkpoint, diags);
  }
  printDiagnostics(diags);
  printDiagnostics(shardDiags);
  if (!config || diags.hasErrors() || shardDiags.hasErrors()) {
    WithColor::error(errs(), "msac")
        << planDir << ": " << diags.errorCount() + shardDiags.errorCount()
        << " problem(s) found\n";
    return 1;
  }
  if (recipe && config->quantization.method != ckpt::QuantMethod::None)
    return usageError(config->quantization.source + ": --quantize-weights=" +
                      ckpt::weightRecipeName(*recipe) +
                      " needs a bf16/f16/f32 checkpoint, but this one is "
                      "already quantized (method " +
                      ckpt::quantMethodName(config->quantization.method) +
                      "); drop --quantize-weights to plan it as stored");
  std::string problem = ckpt::checkCacheDTypes(*config, *kv, *index);
  noteCheckpointKVFormat(*config, *kv);
  if (!problem.empty())
    return usageError(planDir + "/config.json: " + problem);
  if (maxSeqLen > 0 && config->maxPositionEmbeddings &&
      maxSeqLen > config->maxPositionEmbeddings)
    return usageError("--max-seq-len " + std::to_string(maxSeqLen) +
                      " exceeds the model's max_position_embeddings (" +
                      std::to_string(config->maxPositionEmbeddings) + ", " +
                      planDir + "/config.json)");
  int64_t length = maxSeqLen > 0 ? maxSeqLen.getValue()
                                 : (config->maxPositionEmbeddings
                                        ? config->maxPositionEmbeddings
                                        : 4096);
  ckpt::MemoryPlan plan =
      ckpt::planMemory(*config, weights ? &*weights : nullptr, *kv, *index,
                       length, *budget, recipe);
  // As vLLM refuses to start when no KV-cache block fits: a plan of zero
  // sequences is an error, not a report.
  if (std::string problem = ckpt::checkCacheBudget(plan, memory.getValue());
      !problem.empty()) {
    WithColor::error(errs(), "msac") << problem << "\n";
    return 1;
  }
  std::ostringstream os;
  if (planJson)
    os << ckpt::memoryPlanJson(plan) << "\n";
  else
    ckpt::printMemoryPlan(plan, os);
  outs() << os.str();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  cl::HideUnrelatedOptions({&msacCategory, &gpuTuningOptionCategory()});
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "msac " << MSAC_VERSION << " (MiniMax-M3 ahead-of-time compiler)\n"
       << "  artifact format version: " << kArtifactFormatVersion << "\n"
       << "  LLVM version: " << LLVM_VERSION_STRING << "\n";
  });
  // Parse errors (an unknown flag, subcommand or --emit stage) are usage
  // errors: exit 2 like the others, not LLVM's exit 1.
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "msac: ahead-of-time compiler for MiniMax-M3-family models\n\n"
          "  msac import MODEL_DIR   check a checkpoint and print its msa IR\n"
          "  msac compile MODEL_DIR --target host -o MODEL.msa\n"
          "                          compile to an artifact for msac-run\n"
          "  msac plan MODEL_DIR     weight and KV-cache memory report\n",
          &errs()))
    return 2;
  if (importCommand)
    return runImport();
  if (planCommand)
    return runPlan();
  if (compileCommand)
    return runCompile();
  return usageError("no subcommand given; run `msac --help`");
}
