//===- TokenizerCheck.cpp - Does msac-run read a tokenizer.json? ----------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/TokenizerCheck.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>

using namespace msac::ckpt;
using json = nlohmann::json;

namespace {

constexpr const char *kConsequence =
    "; `msac-run generate` reads only byte-level BPE tokenizers (model.type "
    "BPE with a ByteLevel pre_tokenizer) and will refuse the artifact "
    "(inspect and bench need no tokenizer)";

/// True when `pre` (a pre_tokenizer, possibly a Sequence) has a ByteLevel.
bool hasByteLevel(const json &pre) {
  if (!pre.is_object())
    return false;
  const std::string type = pre.value("type", "");
  if (type == "ByteLevel")
    return true;
  if (type == "Sequence" && pre.contains("pretokenizers") &&
      pre.at("pretokenizers").is_array())
    for (const json &p : pre.at("pretokenizers"))
      if (hasByteLevel(p))
        return true;
  return false;
}

} // namespace

void msac::ckpt::checkTokenizer(const std::string &path, Diagnostics &diags) {
  std::ifstream in(path);
  if (!in) {
    diags.warning(path, "", std::string("cannot be read") + kConsequence);
    return;
  }
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception &) {
    diags.warning(path, "", std::string("is not valid JSON") + kConsequence);
    return;
  }
  const json *model =
      root.is_object() && root.contains("model") ? &root.at("model") : nullptr;
  const std::string type = model && model->is_object() &&
                                   model->contains("type") &&
                                   model->at("type").is_string()
                               ? model->at("type").get<std::string>()
                               : "";
  if (type != "BPE") {
    diags.warning(
        path, "model.type",
        (type.empty() ? std::string("is absent") : "is '" + type + "'") +
            kConsequence);
    return;
  }
  if (!hasByteLevel(root.value("pre_tokenizer", json())))
    diags.warning(path, "pre_tokenizer",
                  std::string("a BPE tokenizer without a ByteLevel "
                              "pre_tokenizer is not byte-level") +
                      kConsequence);
}
