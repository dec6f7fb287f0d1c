//===- SafetensorsFuzzer.cpp - libFuzzer target for the header parser -----===//
//
// Part of msac. Feeds arbitrary bytes to parseSafetensorsHeader, built with
// ASan and UBSan. The parser must never read outside the buffer, overflow,
// or crash; it may only accept or report problems.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/Safetensors.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  msac::ckpt::SafetensorsHeader header;
  msac::ckpt::Diagnostics diags;
  bool ok = msac::ckpt::parseSafetensorsHeader("fuzz.safetensors", data, size,
                                               header, diags);
  // Invariants of an accepted header.
  if (ok) {
    uint64_t dataSize = size - header.dataOffset;
    for (const auto &t : header.tensors)
      if (t.begin > t.end || t.end > dataSize)
        __builtin_trap();
  } else if (!diags.hasErrors()) {
    __builtin_trap();
  }
  return 0;
}
