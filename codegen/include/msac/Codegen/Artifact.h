//===- Artifact.h - Writing the msac artifact -------------------*- C++ -*-===//
//
// Part of msac.
//
// An artifact is a folder (conventionally `NAME.msa`):
//
//   manifest.json           format and version, producer, model config,
//                           targets, kernels and their ABI, the buffer plan,
//                           the prefill and decode launch schedules, the
//                           weight index
//   kernels/host-x86_64.so  the host kernels
//   kernels/sm_90a.cubin    NVIDIA kernels (when compiled for that target)
//   weights.bin             every weight the schedule reads, each at a
//                           4096-byte-aligned offset, ready to memory-map;
//                           quantized formats stay packed; a weight with
//                           an `order` is stored in that order (the
//                           chunk-major tiles of permuteChunkMajor), else
//                           as the checkpoint holds it
//   tokenizer.json          copied from the checkpoint when present
//
// The runtime refuses a manifest whose `format_version` differs from its
// own (see runtime/include/msac/Runtime/Artifact.h).
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CODEGEN_ARTIFACT_H
#define MSAC_CODEGEN_ARTIFACT_H

#include "msac/Checkpoint/Checkpoint.h"
#include "msac/Checkpoint/ModelConfig.h"
#include "msac/Codegen/HostProgram.h"

#include <string>

namespace msac {

/// Version of the artifact layout written here and read by the runtime.
/// 2: GPU targets list each kernel's launch shape (`launch.kernels`: grid,
/// block threads and dynamic shared-memory bytes). 3: each kernel lists
/// its parameters (`kernels[i].params`: kind, dtype and shape of the
/// buffers its steps pass). 4: a GPU kernel's launch may name a cluster
/// size (`cluster`) and the step sizes that launch it (`min_tokens`,
/// `max_tokens`), so that a target may run an op by one of several kernels
/// chosen by the step's tokens.
inline constexpr int kArtifactFormatVersion = 4;

/// One compiled target of an artifact.
struct ArtifactTarget {
  std::string name;            ///< host-x86_64, sm_90a, ...
  std::string kernelsFile;     ///< relative to the artifact folder
  int64_t grid = 0, block = 0; ///< GPU launch shape of the first-cut kernels
  /// GPU targets: every kernel's grid (CTAs), block (threads) and dynamic
  /// shared memory (bytes), in the program's kernel order
  /// (emitNvidiaBinary).
  std::vector<KernelGeometry> kernels;
};

/// Stores the 8-bit [rows, cols] matrix `src` (row-major) into `dst` (as
/// many bytes) in the chunk-major tile order of `ranks` ranks
/// (BufferDesc::orderRanks; PackedWeight::orderRanks in
/// codegen/lib/KernelBuilder.h): tiles of 128 rows x 128 bytes, each
/// row-major, tile (h, j) at index (j mod C) H N + h N + j / C with N =
/// `ranks`, C = cols / (128 N), H = rows / 128. Requires rows a multiple of
/// 128 and cols of 128 N.
/// With `headMajor` its head-major variant (BufferDesc::orderHeadMajor):
/// tile (h, j) at h C N + (j mod C) N + j / C.
void permuteChunkMajor(const uint8_t *src, uint8_t *dst, int64_t rows,
                       int64_t cols, int64_t ranks, bool headMajor = false);

/// Writes manifest.json, weights.bin and tokenizer.json into `dir` (which
/// must exist); the kernels of every target were already written there.
/// With `stripWeights` the manifest describes every weight (offsets and
/// sizes included) but weights.bin is not written: a weight-stripped
/// artifact for benchmarking with synthetic weights (`msac-run
/// bench-decode --dummy-weights`). Returns an error message or "".
std::string writeArtifact(const std::string &dir, const HostProgram &program,
                          const std::vector<ArtifactTarget> &targets,
                          const ckpt::ModelConfig &config,
                          const ckpt::Checkpoint &checkpoint,
                          const std::string &modelDir,
                          bool stripWeights = false);

} // namespace msac

#endif // MSAC_CODEGEN_ARTIFACT_H
