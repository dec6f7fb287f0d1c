//===- Artifact.cpp - Loading an msac artifact ----------------------------===//
//
// Part of the msac runtime.
//
//===----------------------------------------------------------------------===//

#include "msac/Runtime/Artifact.h"

#include "msac/Checkpoint/Checksum.h"
#include "msac/Checkpoint/JsonError.h"

#include "JsonField.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace msac::runtime;
using json = nlohmann::json;
using msac::runtime::detail::JsonField;
using msac::runtime::detail::JsonFieldError;

namespace {

/// "" when `path` is an x86-64 ELF64 shared object whose program headers,
/// segments and section headers all lie within the file; else an error
/// naming the file, its size and the size its headers need.
std::string checkSharedObject(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return path + ": cannot load the host kernels: " + std::strerror(errno) +
           "; the artifact is incomplete: compile it again with msac compile "
           "(--target host)";
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  auto corrupt = [&](const std::string &why) {
    return path + ": " + why +
           "; the artifact is damaged (copy it again, or recompile)";
  };
  Elf64_Ehdr eh;
  if (bytes.size() < sizeof(eh))
    return corrupt("file too short for an ELF header (" +
                   std::to_string(bytes.size()) + " bytes)");
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64)
    return corrupt("not an x86-64 ELF64 shared object");
  uint64_t need =
      std::max<uint64_t>(eh.e_phoff + uint64_t(eh.e_phnum) * eh.e_phentsize,
                         eh.e_shoff + uint64_t(eh.e_shnum) * eh.e_shentsize);
  if (need <= bytes.size() && eh.e_phentsize == sizeof(Elf64_Phdr))
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
      need = std::max<uint64_t>(need, ph.p_offset + ph.p_filesz);
    }
  if (need > bytes.size())
    return corrupt("truncated: " + std::to_string(bytes.size()) +
                   " bytes, but its ELF headers describe " +
                   std::to_string(need));
  return "";
}

/// "" when the manifest.json beside the borrowed `weightsPath` (a sibling
/// artifact's weights.bin) lists every weight of `buffers` at the same
/// offset and size and in the same order (`orders`: the weight's manifest
/// "order" object as JSON text, absent for row-major); else an error
/// naming the file, the first weight that differs and the fix.
std::string
checkBorrowedWeights(const std::string &weightsPath,
                     const std::vector<Buffer> &buffers,
                     const std::map<std::string, std::string> &orders) {
  const std::string owner =
      weightsPath.substr(0, weightsPath.find_last_of('/')) + "/manifest.json";
  const std::string fix =
      "; compile this model again without sharing weights.bin, or point "
      "weights.file at an artifact compiled with the same flags";
  std::ifstream in(owner);
  json m(json::value_t::discarded);
  if (in)
    m = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_object() || !m.contains("buffers") ||
      !m["buffers"].is_array())
    return "weights.file names " + weightsPath + ", but " + owner +
           " (the manifest that says how those bytes are stored) is missing "
           "or unreadable" +
           fix;
  std::map<std::string, const json *> theirs;
  for (const json &b : m["buffers"])
    if (b.is_object() && b.contains("kind") && b["kind"] == "weight" &&
        b.contains("name") && b["name"].is_string())
      theirs[b["name"].get<std::string>()] = &b;
  for (const Buffer &b : buffers) {
    if (b.kind != Buffer::Kind::Weight)
      continue;
    auto it = theirs.find(b.name);
    if (it == theirs.end())
      return "weights.file names " + weightsPath + ", but " + owner +
             " has no weight '" + b.name + "'" + fix;
    const json &t = *it->second;
    // The other's fields as JSON text (no throw on a wrong type).
    auto text = [&t](const char *key) {
      return t.contains(key) ? t[key].dump() : std::string("none");
    };
    auto order = orders.find(b.name);
    const std::string mine = order == orders.end() ? "" : order->second;
    const std::string other = t.contains("order") ? t["order"].dump() : "";
    const bool same = text("offset") == std::to_string(b.offset) &&
                      text("bytes") == std::to_string(b.bytes) && mine == other;
    if (!same)
      return "weights.file names " + weightsPath + ", whose manifest " + owner +
             " stores weight '" + b.name + "' at offset " + text("offset") +
             ", " + text("bytes") + " bytes, order " +
             (other.empty() ? "row-major" : other) +
             ", but this artifact reads it at offset " +
             std::to_string(b.offset) + ", " + std::to_string(b.bytes) +
             " bytes, order " + (mine.empty() ? "row-major" : mine) + fix;
  }
  return "";
}

} // namespace

std::string Target::checkKernels(const std::string &bytes) const {
  if (kernelsChecksum.empty())
    return "";
  const std::string got = ckpt::fnv1a64Hex(bytes);
  if (got == kernelsChecksum)
    return "";
  return kernelsPath + ": its checksum (FNV-1a " + got +
         ") is not the manifest's (" + kernelsChecksum +
         "): the file is damaged or the artifact folder mixes files of "
         "different compiles; recompile the model into a fresh folder (msac "
         "compile MODEL -o ARTIFACT)";
}

int64_t Buffer::elementBytes() const {
  if (dtype == "bf16" || dtype == "f16")
    return 2;
  if (dtype == "f32" || dtype == "i32")
    return 4;
  return 1;
}

const Target *Artifact::findTarget(const std::string &name) const {
  for (const Target &t : targetList)
    if (t.name == name)
      return &t;
  return nullptr;
}

KernelLaunchShape Target::shapeOf(const std::string &kernel) const {
  for (size_t i = 0; i < kernelNames.size(); ++i)
    if (kernelNames[i] == kernel)
      return kernelShapes[i];
  return {grid, block, 0};
}

Artifact::~Artifact() {
  if (weights && weightsSize)
    ::munmap(const_cast<uint8_t *>(weights), weightsSize);
  if (library)
    ::dlclose(library);
}

std::unique_ptr<Artifact> Artifact::load(const std::string &dir,
                                         std::string &error) {
  std::unique_ptr<Artifact> a(new Artifact());
  a->dir = dir;
  const std::string manifestPath = dir + "/manifest.json";
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    error = dir + ": no such artifact folder (write one with `msac compile " +
            "MODEL -o " + dir + "`)";
    return nullptr;
  }
  if (!S_ISDIR(st.st_mode)) {
    error = dir + ": is a file, not an artifact folder (`msac compile` " +
            "writes a folder holding manifest.json)";
    return nullptr;
  }
  std::ifstream in(manifestPath);
  if (!in) {
    error = manifestPath + ": cannot be read; is " + dir +
            " an artifact written by `msac compile`?";
    return nullptr;
  }
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // nlohmann's lexer reads a NUL outside a string as the end of the input
  // and would silently drop the rest of the file.
  if (size_t nul = text.find('\0'); nul != std::string::npos) {
    error = manifestPath + ": contains a NUL byte at offset " +
            std::to_string(nul) + "; the artifact is corrupt";
    return nullptr;
  }
  json m;
  try {
    m = json::parse(text);
  } catch (const json::exception &e) {
    error = manifestPath +
            ": not valid JSON: " + msac::ckpt::jsonErrorText(e.what());
    return nullptr;
  }
  // A file of the artifact: a relative path that stays inside the
  // artifact folder, or with `sibling` inside its parent (the weights:
  // bench/h200-inputs.sh points twin artifacts at one weights.bin,
  // ../owner.msa/weights.bin).
  auto insideArtifact = [](const JsonField &f, bool sibling = false) {
    const std::string path = f.string();
    int depth = 0;
    bool ok = !path.empty() && path[0] != '/';
    for (size_t at = 0; ok && at <= path.size();) {
      size_t end = std::min(path.find('/', at), path.size());
      const std::string part = path.substr(at, end - at);
      depth += part == ".." ? -1 : part.empty() || part == "." ? 0 : 1;
      ok = depth >= (sibling ? -1 : 0);
      at = end + 1;
    }
    if (!ok)
      f.fail(sibling ? "a relative path inside the artifact folder or a "
                       "sibling folder"
                     : "a relative path inside the artifact folder");
    return path;
  };
  try {
    // Every field is read through JsonField, whose errors name the field.
    const JsonField root(m, "");
    const std::string format = root.string("format", "");
    if (format != "msac-artifact") {
      error = manifestPath + ": not an msac artifact (format '" + format + "')";
      return nullptr;
    }
    const json &version = root.at("format_version").json();
    a->producer = root.string("producer", "");
    // Compared as written (a huge number must not wrap into another one).
    if (!version.is_number_integer() ||
        version.get<int64_t>() != kArtifactFormatVersion) {
      const bool newer = version.is_number_integer() &&
                         version.get<int64_t>() > kArtifactFormatVersion;
      error = manifestPath + ": artifact format version " + version.dump() +
              " (written by " + a->producer +
              "), but this runtime reads version " +
              std::to_string(kArtifactFormatVersion) +
              (newer ? "; update msac-run to the msac that wrote it, or "
                       "recompile the model with this one"
                     : "; recompile the model with a matching msac");
      return nullptr;
    }
    a->formatVersion = version.get<int>();
    const JsonField model = root.at("model");
    ModelInfo &info = a->info;
    info.modelType = model.string("model_type", "");
    info.hiddenSize = model.at("hidden_size").integer();
    info.numLayers = model.at("num_layers").integer();
    info.numHeads = model.at("num_attention_heads").integer();
    info.numKVHeads = model.at("num_key_value_heads").integer();
    info.headDim = model.at("head_dim").integer();
    info.vocabSize = model.at("vocab_size").integer();
    info.maxPositions = model.integer("max_position_embeddings", 0);
    info.pageSize = model.at("page_size").integer();
    info.bosTokenId = model.integer("bos_token_id", -1);
    if (model.has("eos_token_ids"))
      info.eosTokenIds = model.at("eos_token_ids").integers();
    const std::vector<JsonField> layers = model.at("layers").elements();
    if (int64_t(layers.size()) != info.numLayers)
      throw std::runtime_error(
          "model.layers has " + std::to_string(layers.size()) +
          " entries, but model.num_layers is " +
          std::to_string(info.numLayers) +
          "; the artifact is corrupt, recompile the model");
    for (const JsonField &layer : layers) {
      info.layerAttention.push_back(layer.at("attention").string());
      info.layerPrecision.push_back(
          layer.string("attention_precision", "exact"));
      if (info.layerPrecision.back() != "exact" &&
          info.layerPrecision.back() != "q8")
        throw std::runtime_error(
            "model.layers[" + std::to_string(info.layerPrecision.size() - 1) +
            "].attention_precision is '" + info.layerPrecision.back() +
            "', not a precision contract (exact or q8); the artifact is "
            "corrupt, recompile the model");
    }

    const std::vector<JsonField> targets = root.at("targets").elements();
    if (targets.empty())
      throw std::runtime_error("no targets");
    a->target = targets[0].at("name").string();
    std::string libPath;
    for (const JsonField &t : targets) {
      Target target;
      target.name = t.at("name").string();
      target.kernelsPath = dir + "/" + insideArtifact(t.at("kernels_file"));
      target.kernelsChecksum = t.string("kernels_fnv1a64", "");
      if (t.has("launch")) {
        const JsonField launch = t.at("launch");
        target.grid = launch.at("grid").integer();
        target.block = launch.at("block").integer();
        for (const JsonField &k : launch.at("kernels").elements()) {
          const std::string name = k.at("name").string();
          KernelLaunchShape shape{k.at("grid").integer(),
                                  k.at("block").integer(),
                                  k.at("dynamic_shared_bytes").integer(),
                                  k.boolean("programmatic", false)};
          shape.cluster = k.has("cluster") ? k.at("cluster").integer() : 1;
          if (k.has("min_tokens"))
            shape.minTokens = k.at("min_tokens").integer();
          if (k.has("max_tokens"))
            shape.maxTokens = k.at("max_tokens").integer();
          // Clusters of at most 8 CTAs (the portable size) that tile the
          // grid; token bounds of at least 1 (max 0: none).
          if (shape.cluster < 1 || shape.cluster > 8 ||
              (shape.grid > 0 && shape.grid % shape.cluster != 0) ||
              shape.minTokens < 1 || shape.maxTokens < 0)
            throw std::runtime_error(
                "target " + target.name + ": kernel " + name + " has cluster " +
                std::to_string(shape.cluster) + ", min_tokens " +
                std::to_string(shape.minTokens) + " and max_tokens " +
                std::to_string(shape.maxTokens) +
                "; expected a cluster of 1..8 CTAs dividing the grid, "
                "min_tokens >= 1 and max_tokens >= 0 (0: no bound)");
          if (shape.grid < 1 || shape.grid > (int64_t(1) << 31) - 1 ||
              shape.block < 1 || shape.block > 1024 ||
              shape.dynamicSharedBytes < 0 ||
              shape.dynamicSharedBytes > kMaxDynamicSharedBytes)
            throw std::runtime_error(
                "target " + target.name + ": kernel " + name + " has grid " +
                std::to_string(shape.grid) + ", block " +
                std::to_string(shape.block) + " and " +
                std::to_string(shape.dynamicSharedBytes) +
                " bytes of dynamic shared memory; expected 1..2^31-1 CTAs, "
                "1..1024 threads and 0.." +
                std::to_string(kMaxDynamicSharedBytes) + " bytes");
          target.kernelNames.push_back(name);
          target.kernelShapes.push_back(shape);
        }
      }
      if (target.name == "host-x86_64")
        libPath = target.kernelsPath;
      a->targetList.push_back(target);
    }

    // A shape: integers or size symbols.
    auto readShape = [](const JsonField &field) {
      std::vector<Extent> shape;
      for (const JsonField &e : field.elements()) {
        if (e.json().is_string())
          shape.push_back(Extent{0, e.string()});
        else if (e.json().is_number_integer())
          shape.push_back(Extent{e.integer(), ""});
        else
          e.fail("an integer or a symbol");
      }
      return shape;
    };
    // Each weight's order as its manifest entry writes it (name, ranks,
    // tile), for the check of a borrowed weights.bin below.
    std::map<std::string, std::string> weightOrders;
    for (const JsonField &b : root.at("buffers").elements()) {
      Buffer buffer;
      const std::string kind = b.at("kind").string();
      buffer.name = b.at("name").string();
      if (kind != "input" && kind != "cache" && kind != "weight" &&
          kind != "activation")
        throw std::runtime_error(
            "buffer '" + buffer.name + "' has kind '" + kind +
            "', but buffers are input, cache, weight or activation; the "
            "artifact is corrupt, recompile the model");
      buffer.kind = kind == "input"    ? Buffer::Kind::Input
                    : kind == "cache"  ? Buffer::Kind::Cache
                    : kind == "weight" ? Buffer::Kind::Weight
                                       : Buffer::Kind::Activation;
      buffer.dtype = b.at("dtype").string();
      buffer.shape = readShape(b.at("shape"));
      buffer.argument = b.integer("argument", -1);
      buffer.heads = b.integer("heads", 0);
      buffer.pageSize = b.integer("page_size", 0);
      buffer.headDim = b.integer("head_dim", 0);
      // Manifests before NVFP4 caches had no bytes_per_token (bf16 and
      // FP8 caches only).
      const int64_t plainBytes =
          buffer.dtype == "nvfp4"
              ? 0
              : buffer.heads * buffer.headDim * buffer.elementBytes();
      buffer.bytesPerToken = b.integer("bytes_per_token", plainBytes);
      if (buffer.kind == Buffer::Kind::Cache && buffer.bytesPerToken <= 0)
        throw std::runtime_error("cache '" + buffer.name +
                                 "' has no positive bytes_per_token");
      // The kernels address a token's row as heads x head_dim values of
      // the cache format (NVFP4: head_dim / 2 code bytes and head_dim / 16
      // E4M3 scales per head, PagedCacheType::getBytesPerToken): a smaller
      // bytes_per_token would allocate less than they write.
      if (buffer.kind == Buffer::Kind::Cache) {
        const bool nvfp4 = buffer.dtype == "nvfp4";
        const int64_t h = buffer.heads, d = buffer.headDim;
        const bool shaped = h > 0 && d > 0 && h <= (1 << 16) &&
                            d <= (1 << 16) && (!nvfp4 || d % 16 == 0);
        const int64_t need = !shaped ? 0
                             : nvfp4 ? h * (d / 2 + d / 16)
                                     : h * d * buffer.elementBytes();
        if (!shaped || need != buffer.bytesPerToken)
          throw std::runtime_error(
              "cache '" + buffer.name + "' has bytes_per_token " +
              std::to_string(buffer.bytesPerToken) + ", but " +
              std::to_string(h) + " heads of " + std::to_string(d) + " " +
              buffer.dtype + " channels" +
              (shaped ? " take " + std::to_string(need)
                      : " are not a cache row") +
              "; the artifact is corrupt, recompile the model");
      }
      buffer.offset = b.unsignedInteger("offset", 0);
      if (buffer.kind == Buffer::Kind::Weight && b.has("order")) {
        buffer.order = b.at("order").at("name").string();
        weightOrders[buffer.name] = b.at("order").json().dump();
      }
      buffer.bytes = b.unsignedInteger("bytes", 0);
      a->bufferList.push_back(buffer);
    }
    // Each kernel's parameters (kind, dtype, shape), which its steps'
    // buffers must match.
    struct Param {
      std::string kind, dtype;
      std::vector<Extent> shape;
    };
    std::vector<std::vector<Param>> kernelParams;
    for (const JsonField &k : root.at("kernels").elements()) {
      a->kernels.push_back(k.at("name").string());
      std::vector<Param> params;
      for (const JsonField &p : k.at("params").elements()) {
        params.push_back(Param{p.at("kind").string(), p.at("dtype").string(),
                               readShape(p.at("shape"))});
      }
      kernelParams.push_back(std::move(params));
    }
    // Kernels the schedules launch must be the manifest's.
    auto knownKernel = [&](const std::string &name) {
      return std::find(a->kernels.begin(), a->kernels.end(), name) !=
             a->kernels.end();
    };
    for (const Target &t : a->targetList)
      if (t.grid && t.kernelNames != a->kernels)
        throw std::runtime_error(
            "target " + t.name + " lists the launch shapes of " +
            std::to_string(t.kernelNames.size()) +
            " kernels, which are not the manifest's " +
            std::to_string(a->kernels.size()) + " kernels in order");
    // A step passes exactly its kernel's parameters (their dtypes and
    // sizes): a dropped, added or swapped buffer would hand the kernel
    // memory of another size or type. Checked below, after the buffers'
    // own dtypes and extents.
    auto describe = [](const std::string &kind, const std::string &dtype,
                       const std::vector<Extent> &shape) {
      std::string d = kind + " " + dtype + " [";
      for (size_t i = 0; i < shape.size(); ++i)
        d += (i ? ", " : "") + (shape[i].symbol.empty()
                                    ? std::to_string(shape[i].value)
                                    : shape[i].symbol);
      return d + "]";
    };
    // Steps may pass another view of the same memory (a kernel taking
    // [T, 64] gets [T, 2, 32] elsewhere): shapes agree when their fixed
    // extents multiply to the same count and their symbols are the same.
    auto sameSize = [](const std::vector<Extent> &x,
                       const std::vector<Extent> &y) {
      auto signature = [](const std::vector<Extent> &shape) {
        int64_t fixed = 1;
        std::vector<std::string> symbols;
        for (const Extent &e : shape) {
          if (e.symbol.empty())
            fixed = e.value > 0 && fixed <= INT64_MAX / e.value
                        ? fixed * e.value
                        : -1;
          else
            symbols.push_back(e.symbol);
        }
        std::sort(symbols.begin(), symbols.end());
        return std::make_pair(fixed, symbols);
      };
      return signature(x) == signature(y);
    };
    auto checkStepParams = [&](const std::string &where, const Step &step) {
      const size_t k =
          std::find(a->kernels.begin(), a->kernels.end(), step.kernel) -
          a->kernels.begin();
      const std::vector<Param> &params = kernelParams[k];
      if (step.buffers.size() != params.size())
        throw std::runtime_error(
            where + " passes " + std::to_string(step.buffers.size()) +
            " buffers to kernel " + step.kernel + ", which takes " +
            std::to_string(params.size()) +
            "; the artifact is corrupt, recompile the model");
      for (size_t i = 0; i < params.size(); ++i) {
        const Buffer &b = a->bufferList[step.buffers[i]];
        const std::string kind = b.kind == Buffer::Kind::Input   ? "input"
                                 : b.kind == Buffer::Kind::Cache ? "cache"
                                 : b.kind == Buffer::Kind::Weight
                                     ? "weight"
                                     : "activation";
        if (kind != params[i].kind || b.dtype != params[i].dtype ||
            !sameSize(b.shape, params[i].shape))
          throw std::runtime_error(
              where + " passes buffer " + std::to_string(step.buffers[i]) +
              " ('" + b.name + "', " + describe(kind, b.dtype, b.shape) +
              ") as parameter " + std::to_string(i) + " of kernel " +
              step.kernel + ", which takes " +
              describe(params[i].kind, params[i].dtype, params[i].shape) +
              "; the artifact is corrupt, recompile the model");
      }
    };
    auto readSchedule = [&](const JsonField &steps, std::vector<Step> &out) {
      for (const JsonField &s : steps.elements()) {
        Step step;
        step.kernel = s.at("kernel").string();
        if (!knownKernel(step.kernel))
          throw std::runtime_error("a step launches kernel '" + step.kernel +
                                   "', which the manifest's kernels do not "
                                   "list; the artifact is corrupt, recompile "
                                   "the model");
        step.op = s.string("op", "");
        step.buffers = s.at("buffers").integers();
        for (int64_t id : step.buffers)
          if (id < 0 || id >= static_cast<int64_t>(a->bufferList.size()))
            throw std::runtime_error("step of kernel " + step.kernel +
                                     " names buffer " + std::to_string(id) +
                                     ", which does not exist");
        out.push_back(step);
      }
    };
    const JsonField schedules = root.at("schedules");
    if (schedules.has("init"))
      readSchedule(schedules.at("init"), a->init);
    readSchedule(schedules.at("prefill"), a->prefill);
    readSchedule(schedules.at("decode"), a->decode);
    if (a->prefill.empty() || a->decode.empty())
      throw std::runtime_error(
          "schedules.prefill and schedules.decode must each launch at least "
          "one kernel; the artifact is corrupt, recompile the model");
    a->outputList = root.at("outputs").integers();
    // Each step's last launch writes the logits (msa.logits's result, its
    // last buffer), which the runtime then reads: a schedule cut short
    // would leave them stale or unwritten.
    for (auto [name, list] :
         {std::pair<const char *, const std::vector<Step> *>{"prefill",
                                                             &a->prefill},
          {"decode", &a->decode}})
      if (a->outputList.empty() || list->back().buffers.empty() ||
          list->back().buffers.back() != a->outputList[0])
        throw std::runtime_error(
            std::string("schedules.") + name +
            " does not end with the launch that writes the logits (output " +
            (a->outputList.empty() ? std::string("none")
                                   : std::to_string(a->outputList[0])) +
            "); the artifact is corrupt, recompile the model");
    // A hand-edited or corrupt manifest must not reach the kernels: the
    // buffers' element types are the ones msac writes, and the model's
    // vocabulary is the logits buffer's width (every step reads that many
    // logits per sequence).
    static const char *const kDTypes[] = {
        "bf16", "f16",      "f32",    "i32",       "i8",
        "ui8",  "f8E4M3FN", "f8E5M2", "f8E8M0FNU", "nvfp4"};
    for (const Buffer &b : a->bufferList)
      if (std::find(std::begin(kDTypes), std::end(kDTypes), b.dtype) ==
          std::end(kDTypes))
        throw std::runtime_error("buffer '" + b.name + "' has dtype '" +
                                 b.dtype +
                                 "', which msac does not write; the artifact "
                                 "is corrupt, recompile the model");
    // Extents are positive, or the step symbols the runtime sizes
    // (HostModel/CudaModel: T and N tokens, S sequences, MB blocks per
    // sequence); an unknown symbol or a 0 would allocate nothing.
    for (const Buffer &b : a->bufferList)
      for (const Extent &e : b.shape)
        if (e.symbol.empty() ? e.value < 1
                             : e.symbol != "T" && e.symbol != "N" &&
                                   e.symbol != "S" && e.symbol != "MB")
          throw std::runtime_error(
              "buffer '" + b.name + "' has extent " +
              (e.symbol.empty() ? std::to_string(e.value)
                                : "'" + e.symbol + "'") +
              ", but extents are positive integers or T, N, S, MB; the "
              "artifact is corrupt, recompile the model");
    // The step inputs are the runtime's fixed arguments (HostModel.h
    // StepInputs::argument): each once, with its shape.
    static const char *const kInputShapes[] = {"T", "T", "T", "N", "S,MB"};
    std::vector<int> inputSeen(std::size(kInputShapes), 0);
    for (const Buffer &b : a->bufferList) {
      if (b.kind != Buffer::Kind::Input)
        continue;
      std::string shape;
      for (const Extent &e : b.shape)
        shape += (shape.empty() ? "" : ",") +
                 (e.symbol.empty() ? std::to_string(e.value) : e.symbol);
      if (b.argument < 0 ||
          b.argument >= static_cast<int64_t>(std::size(kInputShapes)) ||
          inputSeen[b.argument]++ || shape != kInputShapes[b.argument] ||
          b.dtype != "i32")
        throw std::runtime_error(
            "input '" + b.name + "' is argument " + std::to_string(b.argument) +
            " with dtype " + b.dtype + " and shape [" + shape +
            "], but the step inputs are arguments 0-4, each once, i32, "
            "shaped [T], [T], [T], [N], [S, MB]; the artifact is corrupt, "
            "recompile the model");
    }
    // A weight's bytes are its shape's elements times the element size
    // (every weight msac writes has a fixed shape and a whole-byte element
    // type; packed payloads are ui8 bytes): the kernels read that many.
    for (const Buffer &b : a->bufferList) {
      if (b.kind != Buffer::Kind::Weight || b.dtype == "nvfp4")
        continue;
      // A product past 2^64 must not wrap into a small size.
      uint64_t need = static_cast<uint64_t>(b.elementBytes());
      bool fixed = true, overflow = false;
      for (const Extent &e : b.shape) {
        fixed &= e.symbol.empty();
        overflow |= __builtin_mul_overflow(
            need, static_cast<uint64_t>(e.symbol.empty() ? e.value : 1), &need);
      }
      if (!fixed || overflow || need != b.bytes)
        throw std::runtime_error(
            "weight '" + b.name + "' has " + std::to_string(b.bytes) +
            " bytes, but its " + (fixed ? "" : "symbolic ") + "shape of " +
            b.dtype + " elements needs " +
            (overflow ? std::string("more than 2^64") : std::to_string(need)) +
            "; the artifact is corrupt, recompile the model");
    }
    for (const Buffer &b : a->bufferList)
      if (b.kind == Buffer::Kind::Cache && b.pageSize != info.pageSize)
        throw std::runtime_error(
            "model.page_size is " + std::to_string(info.pageSize) +
            ", but cache '" + b.name + "' has pages of " +
            std::to_string(b.pageSize) +
            " tokens (the kernels' page size); the artifact is corrupt, "
            "recompile the model");
    // The q8 contract multiplies E4M3 keys and values (msac compile refuses
    // it over a bf16 KV cache): layer L's k_cache.L and v_cache.L.
    for (const Buffer &b : a->bufferList) {
      if (b.kind != Buffer::Kind::Cache || (b.name.rfind("k_cache.", 0) != 0 &&
                                            b.name.rfind("v_cache.", 0) != 0))
        continue;
      const std::string layer = b.name.substr(8);
      if (layer.empty() || layer.size() > 9 ||
          layer.find_first_not_of("0123456789") != std::string::npos)
        continue;
      const size_t l = std::stoul(layer);
      if (l < info.layerPrecision.size() && info.layerPrecision[l] == "q8" &&
          b.dtype != "f8E4M3FN" && b.dtype != "nvfp4")
        throw std::runtime_error(
            "model.layers[" + layer +
            "].attention_precision is 'q8', but "
            "its cache '" +
            b.name + "' is " + b.dtype +
            " (q8 multiplies E4M3 keys and values: f8E4M3FN or nvfp4); the "
            "artifact is corrupt, recompile the model");
    }
    if (a->outputList.empty())
      throw std::runtime_error("no outputs");
    for (int64_t id : a->outputList)
      if (id < 0 || id >= static_cast<int64_t>(a->bufferList.size()))
        throw std::runtime_error("output " + std::to_string(id) +
                                 " names no buffer");
    // Token ids of the model are vocabulary rows (bos_token_id may be
    // absent: -1).
    auto checkToken = [&](int64_t id, const std::string &field) {
      if (id < 0 || id >= info.vocabSize)
        throw std::runtime_error(
            "model." + field + " is " + std::to_string(id) +
            ", outside the vocabulary of " + std::to_string(info.vocabSize) +
            " tokens; the artifact is corrupt, recompile the model");
    };
    if (info.bosTokenId != -1)
      checkToken(info.bosTokenId, "bos_token_id");
    for (int64_t id : info.eosTokenIds)
      checkToken(id, "eos_token_ids");
    const Buffer &logits = a->bufferList[a->outputList[0]];
    if (logits.dtype != "f32")
      throw std::runtime_error("the logits buffer '" + logits.name +
                               "' has dtype " + logits.dtype +
                               ", but the runtime reads FP32 logits (f32); "
                               "the artifact is corrupt, recompile the model");
    if (info.vocabSize <= 0 || logits.shape.empty() ||
        !logits.shape.back().symbol.empty() ||
        logits.shape.back().value != info.vocabSize)
      throw std::runtime_error(
          "model.vocab_size is " + std::to_string(info.vocabSize) +
          ", but the logits buffer '" + logits.name + "' has " +
          (logits.shape.empty() || !logits.shape.back().symbol.empty()
               ? std::string("no fixed width")
               : std::to_string(logits.shape.back().value) + " columns") +
          "; the artifact is corrupt, recompile the model");
    for (auto [name, list] :
         {std::pair<const char *, const std::vector<Step> *>{"init", &a->init},
          {"prefill", &a->prefill},
          {"decode", &a->decode}})
      for (size_t i = 0; i < list->size(); ++i)
        checkStepParams(std::string("schedules.") + name + "[" +
                            std::to_string(i) + "]",
                        (*list)[i]);

    // Weights.
    const JsonField weightsField = root.at("weights");
    const std::string weightsFile =
        insideArtifact(weightsField.at("file"), /*sibling=*/true);
    const std::string weightsPath = dir + "/" + weightsFile;
    a->stripped = weightsField.boolean("stripped", false);
    // Weights start at multiples of the stated alignment (msac writes
    // 4096; the kernels' vector loads need at least 16) and do not
    // overlap.
    {
      const uint64_t align = weightsField.unsignedInteger("alignment", 16);
      std::vector<const Buffer *> weights;
      for (const Buffer &b : a->bufferList)
        if (b.kind == Buffer::Kind::Weight)
          weights.push_back(&b);
      std::sort(weights.begin(), weights.end(),
                [](const Buffer *x, const Buffer *y) {
                  return x->offset < y->offset;
                });
      for (size_t i = 0; i < weights.size(); ++i) {
        const Buffer &b = *weights[i];
        uint64_t end = 0;
        const bool wraps = __builtin_add_overflow(b.offset, b.bytes, &end);
        std::string why;
        if (align < 16 || (align & (align - 1)) != 0)
          why = "weights.alignment " + std::to_string(align) +
                " is not a power of two of at least 16";
        else if (b.offset % align != 0)
          why = "it starts at offset " + std::to_string(b.offset) +
                ", not a multiple of weights.alignment " +
                std::to_string(align);
        else if (wraps)
          why = "its offset plus its size pass 2^64";
        else if (i + 1 < weights.size() && end > weights[i + 1]->offset)
          why = "it overlaps weight '" + weights[i + 1]->name + "'";
        if (!why.empty()) {
          error = dir + "/manifest.json: weight '" + b.name + "': " + why +
                  "; the artifact is corrupt, recompile the model";
          return nullptr;
        }
      }
    }
    int fd = -1;
    if (a->stripped) {
      // Only the description; offsets are checked against the stated size.
      a->weightsSize = weightsField.at("bytes").unsignedInteger();
      for (const Buffer &b : a->bufferList)
        if (b.kind == Buffer::Kind::Weight &&
            (b.bytes > a->weightsSize || b.offset > a->weightsSize - b.bytes)) {
          error = dir + "/manifest.json: weight '" + b.name +
                  "' lies outside the stated weights size; the artifact is "
                  "corrupt";
          return nullptr;
        }
    }
    if (!a->stripped) {
      fd = ::open(weightsPath.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        error = weightsPath + ": cannot open: " + std::strerror(errno) +
                "; the artifact is incomplete: compile it again with msac "
                "compile";
        return nullptr;
      }
      struct stat st;
      ::fstat(fd, &st);
      a->weightsSize = static_cast<uint64_t>(st.st_size);
      uint64_t expected = weightsField.at("bytes").unsignedInteger();
      if (a->weightsSize < expected) {
        ::close(fd);
        error = weightsPath + ": " + std::to_string(a->weightsSize) +
                " bytes, but the manifest expects " + std::to_string(expected) +
                "; the artifact is truncated";
        return nullptr;
      }
      if (a->weightsSize) {
        void *map =
            ::mmap(nullptr, a->weightsSize, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
          ::close(fd);
          error = weightsPath + ": cannot map: " + std::strerror(errno);
          return nullptr;
        }
        a->weights = static_cast<const uint8_t *>(map);
      }
      ::close(fd);
      for (const Buffer &b : a->bufferList)
        if (b.kind == Buffer::Kind::Weight &&
            (b.bytes > a->weightsSize || b.offset > a->weightsSize - b.bytes)) {
          error = weightsPath + ": weight '" + b.name +
                  "' lies outside the file; the artifact is corrupt";
          return nullptr;
        }
      // A weights.bin of a sibling artifact (a weights.file through "..",
      // "../OTHER/weights.bin", as bench/h200-inputs.sh shares one
      // checkpoint's bytes) must hold every weight where and as this
      // manifest says: the same offset, size and order in OTHER's manifest.
      // msac compile may store a weight in another order for one target
      // (docs/architecture.md, "Weight orders"), and the bytes alone do not
      // show it.
      if (weightsFile.find("..") != std::string::npos) {
        if (std::string e =
                checkBorrowedWeights(weightsPath, a->bufferList, weightOrders);
            !e.empty()) {
          error = manifestPath + ": " + e;
          return nullptr;
        }
      }
    }

    // dlopen maps the file and faults on pages past its end: check that a
    // (say, partly copied) shared object holds what its headers describe.
    if (!libPath.empty())
      if (std::string e = checkSharedObject(libPath); !e.empty()) {
        error = e;
        return nullptr;
      }
    // Every target's kernels file that is present must be the one this
    // manifest was written with (a missing GPU file is reported when a GPU
    // loads it).
    for (const Target &t : a->targetList) {
      std::ifstream in(t.kernelsPath, std::ios::binary);
      if (!in)
        continue;
      std::string bytes((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
      if (std::string e = t.checkKernels(bytes); !e.empty()) {
        error = e;
        return nullptr;
      }
    }

    // Host kernels (a GPU-only artifact has none).
    if (libPath.empty())
      return a;

    a->library = ::dlopen(libPath.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!a->library) {
      error = libPath + ": cannot load the host kernels: " + ::dlerror();
      return nullptr;
    }
    for (std::vector<Step> *schedule : {&a->init, &a->prefill, &a->decode})
      for (Step &step : *schedule) {
        step.function = reinterpret_cast<HostKernel>(
            ::dlsym(a->library, step.kernel.c_str()));
        if (!step.function) {
          error = libPath + ": kernel '" + step.kernel +
                  "' named by the manifest is missing";
          return nullptr;
        }
      }
  } catch (const JsonFieldError &e) {
    error = manifestPath + ": malformed manifest: " + e.what() +
            "; the artifact is corrupt, recompile the model";
    return nullptr;
  } catch (const std::exception &e) {
    error = manifestPath +
            ": malformed manifest: " + msac::ckpt::jsonErrorText(e.what());
    return nullptr;
  }
  return a;
}
