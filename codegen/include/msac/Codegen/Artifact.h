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
//   weights.bin             every weight the schedule reads, each at a
//                           4096-byte-aligned offset, ready to memory-map;
//                           quantized formats stay packed
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
inline constexpr int kArtifactFormatVersion = 1;

/// Writes manifest.json, weights.bin and tokenizer.json into `dir` (which
/// must exist); the kernels were already written to
/// `dir/kernels/host-x86_64.so`. Returns an error message or "".
std::string writeArtifact(const std::string &dir, const HostProgram &program,
                          const ckpt::ModelConfig &config,
                          const ckpt::Checkpoint &checkpoint,
                          const std::string &modelDir);

} // namespace msac

#endif // MSAC_CODEGEN_ARTIFACT_H
