//===- DType.cpp - safetensors element types ------------------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/DType.h"

#include <array>
#include <utility>

using namespace msac::ckpt;

namespace {
struct DTypeEntry {
  DType dtype;
  std::string_view name;
  unsigned bits;
};
constexpr std::array<DTypeEntry, 22> kDTypes = {{
    {DType::BOOL, "BOOL", 8},
    {DType::U8, "U8", 8},
    {DType::I8, "I8", 8},
    {DType::U16, "U16", 16},
    {DType::I16, "I16", 16},
    {DType::U32, "U32", 32},
    {DType::I32, "I32", 32},
    {DType::U64, "U64", 64},
    {DType::I64, "I64", 64},
    {DType::F16, "F16", 16},
    {DType::BF16, "BF16", 16},
    {DType::F32, "F32", 32},
    {DType::F64, "F64", 64},
    {DType::C64, "C64", 64},
    {DType::F8_E4M3, "F8_E4M3", 8},
    {DType::F8_E5M2, "F8_E5M2", 8},
    {DType::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8},
    {DType::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8},
    {DType::F8_E8M0, "F8_E8M0", 8},
    {DType::F4, "F4", 4},
    {DType::F6_E2M3, "F6_E2M3", 6},
    {DType::F6_E3M2, "F6_E3M2", 6},
}};
} // namespace

std::optional<DType> msac::ckpt::parseDType(std::string_view name) {
  for (const DTypeEntry &entry : kDTypes)
    if (entry.name == name)
      return entry.dtype;
  return std::nullopt;
}

std::string_view msac::ckpt::dtypeName(DType dtype) {
  for (const DTypeEntry &entry : kDTypes)
    if (entry.dtype == dtype)
      return entry.name;
  return "?";
}

unsigned msac::ckpt::dtypeBits(DType dtype) {
  for (const DTypeEntry &entry : kDTypes)
    if (entry.dtype == dtype)
      return entry.bits;
  return 0;
}

bool msac::ckpt::isDenseFloat(DType dtype) {
  return dtype == DType::BF16 || dtype == DType::F16 || dtype == DType::F32;
}
