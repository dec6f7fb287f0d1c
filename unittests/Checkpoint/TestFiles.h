//===- TestFiles.h - Temporary files for checkpoint tests -------*- C++ -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_UNITTESTS_CHECKPOINT_TESTFILES_H
#define MSAC_UNITTESTS_CHECKPOINT_TESTFILES_H

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace msac::test {

/// A fresh temporary folder, removed with the object.
class TempDir {
public:
  TempDir() {
    std::string templ =
        (std::filesystem::temp_directory_path() / "msac-test-XXXXXX").string();
    path = mkdtemp(templ.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string &name) const {
    return (std::filesystem::path(path) / name).string();
  }
  std::string path;
};

inline void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A safetensors file: 8-byte little-endian `headerLength` (default: the
/// header's size), the header text, then `data`.
inline std::string safetensorsBytes(const std::string &header,
                                    const std::string &data,
                                    int64_t headerLength = -1) {
  uint64_t n = headerLength < 0 ? header.size()
                                : static_cast<uint64_t>(headerLength);
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return bytes + header + data;
}

inline std::string rawLength(uint64_t n, size_t fileSize) {
  std::string bytes(fileSize, ' ');
  for (int i = 0; i < 8 && i < static_cast<int>(fileSize); ++i)
    bytes[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return bytes;
}

} // namespace msac::test

#endif // MSAC_UNITTESTS_CHECKPOINT_TESTFILES_H
