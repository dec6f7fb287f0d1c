//===- Checksum.h - Artifact file checksums ---------------------*- C++ -*-===//
//
// Part of msac. Header-only (the compiler and the LLVM-free runtime share it).
//
//===----------------------------------------------------------------------===//
//
// FNV-1a, 64-bit (Fowler, Noll, Vo; offset basis 0xcbf29ce484222325, prime
// 0x100000001b3). An artifact's manifest records it for each target's
// kernels file, so that a folder mixing files of different compiles is
// refused at load instead of running kernels built for another buffer
// plan. Not a cryptographic hash: it detects accidents, not tampering.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_CHECKSUM_H
#define MSAC_CHECKPOINT_CHECKSUM_H

#include <cstdint>
#include <cstdio>
#include <string>

namespace msac::ckpt {

/// FNV-1a (64-bit) of `n` bytes, continuing from `hash`.
inline uint64_t fnv1a64(const unsigned char *data, size_t n,
                        uint64_t hash = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < n; ++i) {
    hash ^= data[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

/// fnv1a64 of a byte string as 16 lower-case hex digits.
inline std::string fnv1a64Hex(const std::string &bytes) {
  uint64_t h = fnv1a64(reinterpret_cast<const unsigned char *>(bytes.data()),
                       bytes.size());
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(h));
  return text;
}

/// fnv1a64Hex of the whole file at `path`; "" when it cannot be read.
inline std::string fileFnv1a64Hex(const std::string &path) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return "";
  std::string bytes;
  char buffer[1 << 16];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), f)) > 0)
    bytes.append(buffer, got);
  const bool ok = !std::ferror(f);
  std::fclose(f);
  return ok ? fnv1a64Hex(bytes) : "";
}

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_CHECKSUM_H
