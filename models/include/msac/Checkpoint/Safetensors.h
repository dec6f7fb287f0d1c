//===- Safetensors.h - Memory-mapped safetensors reader ---------*- C++ -*-===//
//
// Part of msac.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON mapping tensor names to {dtype, shape, data_offsets}, then the data
// section that the offsets index (relative to its first byte). The reader
// maps the file and never copies tensor data. Before any tensor is used it
// checks: the header length (> 0, <= 100 MB, inside the file); the JSON
// (well-formed, an object, no duplicate names, `__metadata__` a string map);
// each entry (known dtype, non-negative shape, exactly two ordered integer
// offsets inside the data section, `end - begin == prod(shape) * size`);
// and the data section as a whole (no overlapping tensors, no holes, no
// trailing bytes). Every problem is reported, naming file and tensor.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_SAFETENSORS_H
#define MSAC_CHECKPOINT_SAFETENSORS_H

#include "msac/Checkpoint/DType.h"
#include "msac/Checkpoint/Diagnostics.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace msac::ckpt {

/// Largest accepted header, as in the reference safetensors implementation.
inline constexpr uint64_t kMaxHeaderBytes = 100u * 1000u * 1000u;

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  /// Byte range in the data section, `[begin, end)`.
  uint64_t begin = 0;
  uint64_t end = 0;

  /// Product of the shape (1 for a scalar).
  int64_t numElements() const;
  uint64_t numBytes() const { return end - begin; }
};

/// The parsed header of a safetensors file.
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors; // in header order
  std::map<std::string, std::string> metadata;
  /// File offset of the data section (8 + header length).
  uint64_t dataOffset = 0;
  /// Data-section byte ranges [begin, end) that no tensor claims: holes
  /// (e.g. a tensor's entry removed from the header) and a tail. Each is
  /// reported as an error, but the tensors of the header stay readable.
  std::vector<std::pair<uint64_t, uint64_t>> unclaimed;
};

/// Parses and validates the header of the safetensors file held in
/// `bytes[0 .. size)`. `fileName` only labels diagnostics. Returns false
/// when any error was reported; entries that validated are still returned.
/// Never reads outside `bytes`, never allocates more than the header size.
bool parseSafetensorsHeader(std::string_view fileName, const uint8_t *bytes,
                            uint64_t size, SafetensorsHeader &header,
                            Diagnostics &diags);

/// A read-only, memory-mapped safetensors file.
class SafetensorsFile {
public:
  /// Opens and validates `path`. Returns null, with errors in `diags`, when
  /// the file cannot be read or its header is invalid. A file whose only
  /// errors are unclaimed data bytes (holes, a tail) is returned: its
  /// tensors are readable, so what is missing can be named.
  static std::unique_ptr<SafetensorsFile> open(const std::string &path,
                                               Diagnostics &diags);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  const std::string &path() const { return filePath; }
  const std::vector<TensorInfo> &tensors() const { return header.tensors; }
  const std::map<std::string, std::string> &metadata() const {
    return header.metadata;
  }
  uint64_t fileSize() const;
  /// The tensor called `name`, or null.
  const TensorInfo *find(std::string_view name) const;
  /// First byte of `tensor`'s data inside the mapping.
  const uint8_t *data(const TensorInfo &tensor) const;
  /// Data-section ranges no tensor claims (SafetensorsHeader::unclaimed).
  const std::vector<std::pair<uint64_t, uint64_t>> &unclaimed() const {
    return header.unclaimed;
  }

private:
  SafetensorsFile() = default;
  std::string filePath;
  SafetensorsHeader header;
  std::map<std::string, size_t, std::less<>> byName;
  /// The mapped file, or a heap copy of a tiny file (then `size` is 0).
  const uint8_t *mapping = nullptr;
  uint64_t size = 0;
  uint64_t smallFileBytes = 0;
};

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_SAFETENSORS_H
