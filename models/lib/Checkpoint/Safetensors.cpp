//===- Safetensors.cpp - Memory-mapped safetensors reader -----------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/Safetensors.h"
#include "msac/Checkpoint/JsonError.h"

#include "JsonKeys.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace msac::ckpt;
using json = nlohmann::json;

int64_t TensorInfo::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

static std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

/// Reads a JSON number that must be a non-negative integer.
static bool getUnsigned(const json &value, uint64_t &out) {
  if (value.is_number_unsigned()) {
    out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  return false;
}

/// Tensors whose data_offsets end past the data section: reported once
/// per file (a truncated shard would otherwise give one error per tensor).
struct PastEnd {
  uint64_t count = 0, end = 0;
  std::string first;
};

/// Validates one header entry and appends it to `header` when valid.
static void parseEntry(const std::string &file, const std::string &name,
                       const json &entry, uint64_t dataSize,
                       SafetensorsHeader &header, Diagnostics &diags,
                       PastEnd &pastEnd) {
  std::string subject = "tensor '" + name + "'";
  if (!entry.is_object()) {
    diags.error(file, subject, "header entry is not a JSON object");
    return;
  }
  bool ok = true;
  TensorInfo info;
  info.name = name;

  auto dtypeIt = entry.find("dtype");
  if (dtypeIt == entry.end() || !dtypeIt->is_string()) {
    diags.error(file, subject, "missing or non-string 'dtype'");
    ok = false;
  } else if (auto dtype = parseDType(dtypeIt->get<std::string>())) {
    info.dtype = *dtype;
  } else {
    diags.error(file, subject,
                "unknown dtype '" + dtypeIt->get<std::string>() + "'");
    ok = false;
  }

  auto shapeIt = entry.find("shape");
  bool shapeOk = shapeIt != entry.end() && shapeIt->is_array();
  if (shapeOk) {
    for (const json &dim : *shapeIt) {
      uint64_t extent;
      if (!getUnsigned(dim, extent) ||
          extent > static_cast<uint64_t>(INT64_MAX)) {
        shapeOk = false;
        break;
      }
      info.shape.push_back(static_cast<int64_t>(extent));
    }
  }
  if (!shapeOk) {
    diags.error(file, subject,
                "'shape' must be an array of non-negative integers");
    ok = false;
  }

  auto offsetsIt = entry.find("data_offsets");
  if (offsetsIt == entry.end() || !offsetsIt->is_array() ||
      offsetsIt->size() != 2 || !getUnsigned((*offsetsIt)[0], info.begin) ||
      !getUnsigned((*offsetsIt)[1], info.end)) {
    diags.error(file, subject,
                "'data_offsets' must be two non-negative integers [begin, "
                "end] below 2^64, got " +
                    (offsetsIt == entry.end() ? std::string("nothing")
                                              : offsetsIt->dump()));
    ok = false;
  } else if (info.begin > info.end) {
    diags.error(file, subject,
                "data_offsets [" + std::to_string(info.begin) + ", " +
                    std::to_string(info.end) + "] are inverted");
    ok = false;
  } else if (info.end > dataSize) {
    if (pastEnd.count++ == 0)
      pastEnd.first = name;
    pastEnd.end = std::max(pastEnd.end, info.end);
    ok = false;
  }

  for (auto it = entry.begin(); it != entry.end(); ++it)
    if (it.key() != "dtype" && it.key() != "shape" &&
        it.key() != "data_offsets")
      diags.warning(file, subject,
                    "unknown header field '" + it.key() + "' ignored");

  if (!ok)
    return;

  // end - begin must equal prod(shape) * bits / 8, computed without overflow.
  unsigned __int128 bits = dtypeBits(info.dtype);
  bool overflow = false;
  for (int64_t d : info.shape) {
    // Any product beyond 2^70 bits exceeds every possible file.
    if (d != 0 && bits > (static_cast<unsigned __int128>(1) << 70) /
                             static_cast<uint64_t>(d)) {
      overflow = true;
      break;
    }
    bits *= static_cast<uint64_t>(d);
  }
  if (!overflow && bits == 0)
    for (int64_t d : info.shape)
      overflow |= d > (int64_t(1) << 40); // empty, but absurd elsewhere
  if (overflow || bits % 8 != 0) {
    diags.error(file, subject,
                overflow ? "shape " + shapeString(info.shape) + " is too large"
                         : "shape " + shapeString(info.shape) + " of " +
                               std::string(dtypeName(info.dtype)) +
                               " does not fill whole bytes");
    return;
  }
  unsigned __int128 expected = bits / 8;
  if (expected != info.numBytes()) {
    // The byte count of a large shape may exceed 64 bits: print all of it.
    std::string needs;
    for (unsigned __int128 v = expected; needs.empty() || v; v /= 10)
      needs.insert(needs.begin(), static_cast<char>('0' + int(v % 10)));
    diags.error(file, subject,
                "data_offsets span " + std::to_string(info.numBytes()) +
                    " bytes but shape " + shapeString(info.shape) + " of " +
                    std::string(dtypeName(info.dtype)) + " needs " + needs +
                    " bytes");
    return;
  }
  header.tensors.push_back(std::move(info));
}

bool msac::ckpt::parseSafetensorsHeader(std::string_view fileName,
                                        const uint8_t *bytes, uint64_t size,
                                        SafetensorsHeader &header,
                                        Diagnostics &diags) {
  const std::string file(fileName);
  const size_t errorsBefore = diags.errorCount();

  static constexpr std::string_view kLfsPointer =
      "version https://git-lfs.github.com/spec";
  if (size >= kLfsPointer.size() &&
      std::memcmp(bytes, kLfsPointer.data(), kLfsPointer.size()) == 0) {
    diags.error(file, "",
                "is a Git LFS pointer, not tensor data; fetch the real file "
                "(for example with `git lfs pull`)");
    return false;
  }
  if (size < 8) {
    diags.error(file, "",
                "file is " + std::to_string(size) +
                    " bytes, too short for the 8-byte safetensors header "
                    "length");
    return false;
  }
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | bytes[i];
  if (headerBytes == 0) {
    diags.error(file, "", "header length is 0; not a safetensors file");
    return false;
  }
  if (headerBytes > kMaxHeaderBytes) {
    diags.error(file, "",
                "header length " + std::to_string(headerBytes) +
                    " exceeds the 100 MB limit; the file is corrupt or not a "
                    "safetensors file");
    return false;
  }
  if (headerBytes > size - 8) {
    diags.error(file, "",
                "header length " + std::to_string(headerBytes) +
                    " exceeds the " + std::to_string(size - 8) +
                    " bytes after the length field; the file is truncated");
    return false;
  }
  header.dataOffset = 8 + headerBytes;
  const uint64_t dataSize = size - header.dataOffset;

  if (long long nul = detail::findNulByte(bytes + 8, bytes + 8 + headerBytes);
      nul >= 0) {
    diags.error(file, "", "header " + detail::nulByteMessage(nul));
    return false;
  }
  // Duplicate names: a plain parse keeps only the last one, so list them
  // with a linear SAX pass first.
  std::vector<std::string> duplicates =
      detail::findDuplicateKeys(bytes + 8, bytes + 8 + headerBytes, 1);
  json root;
  try {
    root = json::parse(bytes + 8, bytes + 8 + headerBytes);
  } catch (const json::exception &e) {
    diags.error(file, "",
                "header is not valid JSON: " + jsonErrorText(e.what()));
    return false;
  }
  if (!root.is_object()) {
    diags.error(file, "",
                std::string("header must be a JSON object, got ") +
                    root.type_name());
    return false;
  }
  for (const std::string &name : duplicates)
    diags.error(file, "tensor '" + name + "'",
                "appears more than once in the header");

  PastEnd pastEnd;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) {
        diags.error(file, "__metadata__", "must be an object of strings");
        continue;
      }
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          diags.error(file, "__metadata__",
                      "value of '" + m.key() + "' must be a string, got " +
                          m->type_name());
          continue;
        }
        header.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    parseEntry(file, it.key(), *it, dataSize, header, diags, pastEnd);
  }
  if (pastEnd.count == 1)
    diags.error(file, "tensor '" + pastEnd.first + "'",
                "data_offsets end " + std::to_string(pastEnd.end) +
                    " lies past the end of the data section (" +
                    std::to_string(dataSize) +
                    " bytes); the file is truncated or corrupt");
  else if (pastEnd.count > 1)
    diags.error(file, "",
                std::to_string(pastEnd.count) + " tensors (e.g. '" +
                    pastEnd.first +
                    "') lie past the end of the data section: it has " +
                    std::to_string(dataSize) + " bytes, the header needs " +
                    std::to_string(pastEnd.end) +
                    "; the file is truncated or corrupt (copy it again)");

  // The data section must be covered exactly: no overlaps, holes or tail.
  // Only meaningful when every entry validated.
  if (diags.errorCount() == errorsBefore) {
    std::vector<const TensorInfo *> order;
    for (const TensorInfo &t : header.tensors)
      order.push_back(&t);
    std::sort(order.begin(), order.end(),
              [](const TensorInfo *a, const TensorInfo *b) {
                return a->begin != b->begin ? a->begin < b->begin
                                            : a->name < b->name;
              });
    uint64_t covered = 0;
    const TensorInfo *previous = nullptr;
    for (const TensorInfo *t : order) {
      if (t->begin < covered && t->numBytes() > 0)
        diags.error(file, "tensor '" + t->name + "'",
                    "bytes [" + std::to_string(t->begin) + ", " +
                        std::to_string(t->end) + ") overlap tensor '" +
                        previous->name + "'");
      else if (t->begin > covered) {
        header.unclaimed.push_back({covered, t->begin});
        diags.error(file, "",
                    "data section bytes [" + std::to_string(covered) + ", " +
                        std::to_string(t->begin) +
                        ") belong to no tensor (a hole)");
      }
      if (t->end > covered) {
        covered = t->end;
        previous = t;
      }
    }
    if (covered < dataSize) {
      header.unclaimed.push_back({covered, dataSize});
      diags.error(file, "",
                  "data section has " + std::to_string(dataSize - covered) +
                      " trailing bytes that belong to no tensor");
    }
  }
  return diags.errorCount() == errorsBefore;
}

//===----------------------------------------------------------------------===//
// SafetensorsFile
//===----------------------------------------------------------------------===//

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string &path,
                                                       Diagnostics &diags) {
  // Check the kind before opening: opening a FIFO would block.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    diags.error(path, "", std::string("cannot open: ") + std::strerror(errno));
    return nullptr;
  }
  if (!S_ISREG(st.st_mode)) {
    diags.error(path, "", "is not a regular file");
    return nullptr;
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    diags.error(path, "", std::string("cannot open: ") + std::strerror(errno));
    return nullptr;
  }
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    diags.error(path, "", "is not a regular file");
    ::close(fd);
    return nullptr;
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  // Unclaimed bytes are the only errors of a header that failed: the
  // coverage check runs only when every entry validated.
  const size_t errorsBefore = diags.errorCount();
  auto onlyUnclaimed = [&](const SafetensorsHeader &header) {
    return !header.unclaimed.empty() &&
           diags.errorCount() - errorsBefore == header.unclaimed.size();
  };
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->filePath = path;
  file->size = size;
  if (size < 64) {
    // Too small to map usefully (and mmap rejects length 0): read it.
    uint8_t buffer[64];
    ssize_t got = size ? ::pread(fd, buffer, size, 0) : 0;
    ::close(fd);
    if (got != static_cast<ssize_t>(size)) {
      diags.error(path, "", "cannot read the file");
      return nullptr;
    }
    SafetensorsHeader header;
    if (!parseSafetensorsHeader(path, buffer, size, header, diags) &&
        !onlyUnclaimed(header))
      return nullptr;
    // A valid file this small holds only empty tensors; keep a copy.
    auto *copy = new uint8_t[size];
    std::memcpy(copy, buffer, size);
    file->mapping = copy;
    file->header = std::move(header);
    file->size = 0; // marks the buffer as heap-owned
    file->smallFileBytes = size;
  } else {
    void *map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) {
      diags.error(path, "", std::string("cannot map: ") + std::strerror(errno));
      return nullptr;
    }
    file->mapping = static_cast<const uint8_t *>(map);
    if (!parseSafetensorsHeader(path, file->mapping, size, file->header,
                                diags) &&
        !onlyUnclaimed(file->header))
      return nullptr;
  }
  for (size_t i = 0; i < file->header.tensors.size(); ++i)
    file->byName.emplace(file->header.tensors[i].name, i);
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (!mapping)
    return;
  if (size == 0)
    delete[] mapping;
  else
    ::munmap(const_cast<uint8_t *>(mapping), size);
}

uint64_t SafetensorsFile::fileSize() const {
  return size == 0 ? smallFileBytes : size;
}

const TensorInfo *SafetensorsFile::find(std::string_view name) const {
  auto it = byName.find(name);
  return it == byName.end() ? nullptr : &header.tensors[it->second];
}

const uint8_t *SafetensorsFile::data(const TensorInfo &tensor) const {
  return mapping + header.dataOffset + tensor.begin;
}
