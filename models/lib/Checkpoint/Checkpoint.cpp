//===- Checkpoint.cpp - A Hugging Face checkpoint folder ------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/Checkpoint.h"
#include "msac/Checkpoint/JsonError.h"

#include "JsonKeys.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace msac::ckpt;
using json = nlohmann::json;
namespace fs = std::filesystem;

static constexpr const char *kIndexName = "model.safetensors.index.json";

/// Reads the shard list of an index file: tensor name -> shard file name.
/// Returns false on a fatal problem.
static bool readIndex(const std::string &path,
                      std::map<std::string, std::string> &weightMap,
                      Diagnostics &diags) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    diags.error(path, "", "is not a regular file");
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diags.error(path, "", "cannot read the index");
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string content = text.str();
  if (long long nul = detail::findNulByte(content.data(),
                                          content.data() + content.size());
      nul >= 0) {
    diags.error(path, "", detail::nulByteMessage(nul));
    return false;
  }
  std::vector<std::string> duplicates = detail::findDuplicateKeys(
      content.begin(), content.end(), 2, "weight_map");
  json root;
  try {
    root = json::parse(content);
  } catch (const json::exception &e) {
    diags.error(path, "", "is not valid JSON: " + jsonErrorText(e.what()));
    return false;
  }
  auto mapIt = root.is_object() ? root.find("weight_map") : root.end();
  if (!root.is_object() || mapIt == root.end() || !mapIt->is_object()) {
    diags.error(path, "", "needs a 'weight_map' object (tensor -> shard)");
    return false;
  }
  for (const std::string &name : duplicates)
    diags.error(path, "tensor '" + name + "'",
                "is listed more than once in weight_map");
  bool ok = true;
  for (auto it = mapIt->begin(); it != mapIt->end(); ++it) {
    if (!it->is_string()) {
      diags.error(path, "tensor '" + it.key() + "'",
                  "weight_map value must be a shard file name");
      ok = false;
      continue;
    }
    std::string shard = it->get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos ||
        shard.find('\\') != std::string::npos || shard == "." ||
        shard == "..") {
      diags.error(path, "tensor '" + it.key() + "'",
                  "shard '" + shard +
                      "' must be a file name in the checkpoint folder");
      ok = false;
      continue;
    }
    weightMap[it.key()] = shard;
  }
  return ok;
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string &directory,
                                             Diagnostics &diags) {
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) {
    diags.error(directory, "", "is not a checkpoint folder (not a directory)");
    return nullptr;
  }
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir = directory;

  std::vector<std::string> present;
  for (const fs::directory_entry &entry :
       fs::directory_iterator(directory, ec))
    if (entry.path().extension() == ".safetensors")
      present.push_back(entry.path().filename().string());
  std::sort(present.begin(), present.end());

  const std::string indexPath = (fs::path(directory) / kIndexName).string();
  std::map<std::string, std::string> weightMap;
  std::vector<std::string> shardNames;
  bool indexed = fs::exists(indexPath, ec);
  if (indexed) {
    if (!readIndex(indexPath, weightMap, diags)) {
      if (weightMap.empty())
        return nullptr;
      ckpt->shardsRead = false; // some entries of the index were dropped
    }
    std::set<std::string> listed;
    for (const auto &[name, shard] : weightMap)
      listed.insert(shard);
    shardNames.assign(listed.begin(), listed.end());
    for (const std::string &file : present)
      if (!listed.count(file))
        diags.warning((fs::path(directory) / file).string(), "",
                      std::string("is not listed in ") + kIndexName +
                          "; ignored (stray file)");
  } else {
    shardNames = present;
    if (shardNames.empty()) {
      diags.error(directory, "",
                  "holds no .safetensors files and no " +
                      std::string(kIndexName));
      return nullptr;
    }
  }

  std::map<std::string, const SafetensorsFile *> shardByName;
  for (const std::string &shard : shardNames) {
    const std::string path = (fs::path(directory) / shard).string();
    if (!fs::exists(path, ec)) {
      diags.error(path, "",
                  std::string("is listed in ") + kIndexName +
                      " but does not exist");
      ckpt->shardsRead = false;
      continue;
    }
    std::unique_ptr<SafetensorsFile> file = SafetensorsFile::open(path, diags);
    if (!file) {
      ckpt->shardsRead = false;
      continue;
    }
    shardByName[shard] = file.get();
    ckpt->files.push_back(std::move(file));
  }

  // Register tensors; a name in two shards is always an error, reported
  // for the first kNamedDuplicates tensors of each pair of shards and then
  // counted (a copied shard repeats every tensor).
  constexpr int kNamedDuplicates = 3;
  std::map<std::string, const SafetensorsFile *> firstHolder;
  std::map<std::pair<const SafetensorsFile *, const SafetensorsFile *>, int>
      duplicates;
  for (const auto &file : ckpt->files)
    for (const TensorInfo &info : file->tensors()) {
      auto [it, inserted] = firstHolder.emplace(info.name, file.get());
      if (!inserted) {
        if (++duplicates[{file.get(), it->second}] <= kNamedDuplicates)
          diags.error(file->path(), "tensor '" + info.name + "'",
                      "is also stored in " + it->second->path() +
                          "; a tensor must live in exactly one shard");
        continue;
      }
      if (indexed) {
        auto mapped = weightMap.find(info.name);
        if (mapped == weightMap.end()) {
          diags.warning(file->path(), "tensor '" + info.name + "'",
                        std::string("is not listed in ") + kIndexName +
                            "; ignored");
          continue;
        }
        auto holder = shardByName.find(mapped->second);
        if (holder == shardByName.end() || holder->second != file.get()) {
          diags.warning(file->path(), "tensor '" + info.name + "'",
                        "is stored here but the index places it in " +
                            mapped->second + "; this copy is ignored");
          continue;
        }
      }
      ckpt->entries[info.name] = Entry{file.get(), &info};
    }
  for (const auto &[pair, count] : duplicates)
    if (count > kNamedDuplicates)
      diags.error(pair.first->path(), "",
                  "and " + std::to_string(count - kNamedDuplicates) +
                      " more tensors are also stored in " +
                      pair.second->path() +
                      " (a copied or overlapping shard?); a tensor must "
                      "live in exactly one shard");
  if (indexed)
    for (const auto &[name, shard] : weightMap) {
      auto holder = shardByName.find(shard);
      if (holder == shardByName.end())
        continue; // shard missing or unreadable, already reported
      if (!holder->second->find(name))
        diags.error(holder->second->path(), "tensor '" + name + "'",
                    std::string("is placed in this shard by ") + kIndexName +
                        " but the shard does not contain it");
    }
  return ckpt;
}

const Checkpoint::Entry *Checkpoint::find(const std::string &name) const {
  auto it = entries.find(name);
  return it == entries.end() ? nullptr : &it->second;
}

std::vector<std::string> Checkpoint::tensorNames() const {
  std::vector<std::string> names;
  for (const auto &[name, entry] : entries)
    names.push_back(name);
  return names;
}

uint64_t Checkpoint::totalTensorBytes() const {
  uint64_t total = 0;
  for (const auto &[name, entry] : entries)
    total += entry.info->numBytes();
  return total;
}

void Checkpoint::overlay(std::unique_ptr<SafetensorsFile> file) {
  for (const TensorInfo &info : file->tensors())
    entries[info.name] = Entry{file.get(), &info};
  files.push_back(std::move(file));
}
