//===- DType.h - safetensors element types ----------------------*- C++ -*-===//
//
// Part of msac. The dtype strings of the safetensors format and their sizes.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_DTYPE_H
#define MSAC_CHECKPOINT_DTYPE_H

#include <cstdint>
#include <optional>
#include <string_view>

namespace msac::ckpt {

/// safetensors dtypes. `F8_E4M3` is OCP E4M3FN (max 448), `F8_E8M0` the MX
/// power-of-two scale, `F4` E2M1 packed two per byte (low nibble first).
enum class DType {
  BOOL, U8, I8, U16, I16, U32, I32, U64, I64,
  F16, BF16, F32, F64, C64,
  F8_E4M3, F8_E5M2, F8_E4M3FNUZ, F8_E5M2FNUZ, F8_E8M0,
  F4, F6_E2M3, F6_E3M2,
};

/// Parses a safetensors dtype string (`"BF16"`, `"F8_E4M3"`, ...).
std::optional<DType> parseDType(std::string_view name);

/// The safetensors spelling of `dtype`.
std::string_view dtypeName(DType dtype);

/// Bits per element: 4 for F4, 6 for F6_*, otherwise 8 x bytes.
unsigned dtypeBits(DType dtype);

/// True for the floating-point dtypes a dense (unquantized) weight may use.
bool isDenseFloat(DType dtype);

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_DTYPE_H
