//===- SafetensorsWriter.h - Streaming safetensors writer -------*- C++ -*-===//
//
// Part of msac. Writes a safetensors file tensor by tensor without holding
// the data in memory: the header (tensors in declaration order, contiguous,
// padded with spaces so the data section starts 8-byte aligned) is written
// first, then each tensor's bytes as the caller produces them.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_SAFETENSORSWRITER_H
#define MSAC_CHECKPOINT_SAFETENSORSWRITER_H

#include "msac/Checkpoint/DType.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace msac::ckpt {

class SafetensorsWriter {
public:
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t bytes;
  };

  /// Declares the next tensor; returns its index.
  size_t add(std::string name, DType dtype, std::vector<int64_t> shape);
  const std::vector<Tensor> &tensors() const { return list; }
  /// Bytes of the data section.
  uint64_t dataBytes() const { return total; }

  /// Called once per tensor, in order; must write exactly `tensor.bytes`
  /// bytes to `out`.
  using Fill =
      std::function<void(size_t index, const Tensor &tensor, std::FILE *out)>;

  /// Writes `path`. With `fill` null the data section is left as a hole of
  /// zeros (a sparse file: instant, takes no disk). Returns an error
  /// message, or "" on success.
  std::string write(const std::string &path, const Fill &fill,
                    const std::map<std::string, std::string> &metadata = {})
      const;

private:
  std::vector<Tensor> list;
  uint64_t total = 0;
};

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_SAFETENSORSWRITER_H
