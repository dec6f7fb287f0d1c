//===- Checkpoint.h - A Hugging Face checkpoint folder ----------*- C++ -*-===//
//
// Part of msac.
//
// Opens the safetensors shards of a checkpoint folder. With a
// `model.safetensors.index.json`, exactly the shards its `weight_map` names
// are opened: a listed shard that is missing, a tensor the index places in a
// shard that does not hold it, or a tensor held by two shards is an error;
// a .safetensors file the index does not list is ignored with a warning.
// Without an index, every `*.safetensors` file is opened and two files
// holding the same tensor name are an error.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_CHECKPOINT_H
#define MSAC_CHECKPOINT_CHECKPOINT_H

#include "msac/Checkpoint/Safetensors.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace msac::ckpt {

class Checkpoint {
public:
  struct Entry {
    const SafetensorsFile *file;
    const TensorInfo *info;
  };

  /// Opens the shards of `directory`. Returns null, with errors in `diags`,
  /// when the folder has no usable shards; otherwise returns the checkpoint
  /// even if some problems were reported (check `diags.hasErrors()`).
  static std::unique_ptr<Checkpoint> open(const std::string &directory,
                                          Diagnostics &diags);

  const std::string &directory() const { return dir; }
  /// The tensor called `name`, or null.
  const Entry *find(const std::string &name) const;
  /// All tensor names, sorted.
  std::vector<std::string> tensorNames() const;
  const std::vector<std::unique_ptr<SafetensorsFile>> &shards() const {
    return files;
  }
  /// True when every shard was opened and its header read (a shard with
  /// unclaimed bytes counts; see SafetensorsFile::open): a tensor that is
  /// not found is then really missing, not in an unreadable shard.
  bool allShardsRead() const { return shardsRead; }
  /// Sum of the data bytes of all tensors.
  uint64_t totalTensorBytes() const;
  /// Adds the tensors of `file` to the checkpoint; each replaces a tensor
  /// of the same name (used for weights quantized at compile time).
  void overlay(std::unique_ptr<SafetensorsFile> file);

private:
  std::string dir;
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, Entry> entries;
  bool shardsRead = true;
};

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_CHECKPOINT_H
