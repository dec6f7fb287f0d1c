//===- SafetensorsWriter.cpp - Streaming safetensors writer ---------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/SafetensorsWriter.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

#include <unistd.h>

using namespace msac::ckpt;

size_t SafetensorsWriter::add(std::string name, DType dtype,
                              std::vector<int64_t> shape) {
  uint64_t bits = dtypeBits(dtype);
  for (int64_t d : shape)
    bits *= static_cast<uint64_t>(d);
  Tensor tensor{std::move(name), dtype, std::move(shape), bits / 8};
  total += tensor.bytes;
  list.push_back(std::move(tensor));
  return list.size() - 1;
}

std::string
SafetensorsWriter::write(const std::string &path, const Fill &fill,
                         const std::map<std::string, std::string> &metadata)
    const {
  nlohmann::ordered_json header;
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const Tensor &t : list) {
    header[t.name] = {{"dtype", std::string(dtypeName(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');

  std::FILE *out = std::fopen(path.c_str(), "wb");
  if (!out)
    return "cannot create " + path + ": " + std::strerror(errno);
  uint8_t length[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<uint8_t>(n >> (8 * i));
  bool ok = std::fwrite(length, 1, 8, out) == 8 &&
            std::fwrite(text.data(), 1, text.size(), out) == text.size();
  if (ok && fill) {
    for (size_t i = 0; i < list.size(); ++i) {
      long before = std::ftell(out);
      fill(i, list[i], out);
      if (static_cast<uint64_t>(std::ftell(out) - before) != list[i].bytes) {
        std::fclose(out);
        return "internal error: tensor '" + list[i].name +
               "' was written with the wrong size";
      }
    }
  }
  ok = ok && std::fflush(out) == 0;
  if (ok && !fill)
    ok = ::ftruncate(::fileno(out), static_cast<off_t>(8 + n + total)) == 0;
  if (std::ferror(out))
    ok = false;
  if (std::fclose(out) != 0)
    ok = false;
  return ok ? "" : "cannot write " + path + ": " + std::strerror(errno);
}
