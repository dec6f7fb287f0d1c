//===- BSQTypesTest.cpp - Layout helpers of the bsq types -----------------===//
//
// Part of msac. Expected byte counts come from msa-m3-spec.md §4.2/§4.4
// (for example 72 bytes per NVFP4 128-vector) and the format definitions,
// not from the implementation.
//
//===----------------------------------------------------------------------===//

#include "msac/Dialect/BSQ/IR/BSQDialect.h"
#include "msac/Dialect/BSQ/IR/BSQTypes.h"
#include "msac/Dialect/MSA/IR/MSADialect.h"
#include "msac/Dialect/MSA/IR/MSATypes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace msac;

namespace {

class BSQTypesTest : public ::testing::Test {
protected:
  BSQTypesTest() {
    context.loadDialect<bsq::BSQDialect, msa::MSADialect>();
  }
  Type parse(StringRef text) { return parseType(text, &context); }

  MLIRContext context;
};

TEST_F(BSQTypesTest, NVFP4Properties) {
  auto type = bsq::NVFP4Type::get(&context);
  auto q = cast<bsq::QuantizedTypeInterface>(Type(type));
  EXPECT_TRUE(isa<Float4E2M1FNType>(q.getStorageType()));
  EXPECT_TRUE(isa<Float8E4M3FNType>(q.getScaleType()));
  EXPECT_EQ(q.getBlockShape(), SmallVector<int64_t>{16});
  EXPECT_FALSE(q.hasGlobalScale());
  EXPECT_EQ(bsq::getStorageBitWidth(q), 4u);
  EXPECT_TRUE(cast<bsq::QuantizedTypeInterface>(
                  Type(bsq::NVFP4Type::get(&context, true)))
                  .hasGlobalScale());
}

TEST_F(BSQTypesTest, MXAndFP8Properties) {
  auto mxfp8 = cast<bsq::QuantizedTypeInterface>(parse("!bsq.mx<f8E4M3FN>"));
  EXPECT_TRUE(isa<Float8E8M0FNUType>(mxfp8.getScaleType()));
  EXPECT_EQ(mxfp8.getBlockShape(), SmallVector<int64_t>{32});
  EXPECT_EQ(bsq::getStorageBitWidth(mxfp8), 8u);
  auto mxfp4 = cast<bsq::QuantizedTypeInterface>(parse("!bsq.mx<f4E2M1FN>"));
  EXPECT_EQ(bsq::getStorageBitWidth(mxfp4), 4u);
  auto blockFp8 = cast<bsq::QuantizedTypeInterface>(
      parse("!bsq.fp8<f8E4M3FN, block = [128, 128]>"));
  EXPECT_TRUE(blockFp8.getScaleType().isF32());
  EXPECT_EQ(blockFp8.getBlockShape(), (SmallVector<int64_t>{128, 128}));
  auto perTensor = cast<bsq::QuantizedTypeInterface>(parse("!bsq.fp8<f8E5M2>"));
  EXPECT_TRUE(perTensor.getBlockShape().empty());
}

TEST_F(BSQTypesTest, PackedByteShape) {
  auto nvfp4 = cast<bsq::QuantizedTypeInterface>(parse("!bsq.nvfp4"));
  auto packed = bsq::getPackedByteShape(nvfp4, {3072, 6144});
  ASSERT_TRUE(succeeded(packed));
  EXPECT_EQ(*packed, (SmallVector<int64_t>{3072, 3072}));
  EXPECT_TRUE(failed(bsq::getPackedByteShape(nvfp4, {4, 7})));
  auto dynamic = bsq::getPackedByteShape(nvfp4, {4, ShapedType::kDynamic});
  ASSERT_TRUE(succeeded(dynamic));
  EXPECT_TRUE(ShapedType::isDynamic(dynamic->back()));
  auto mxfp8 = cast<bsq::QuantizedTypeInterface>(parse("!bsq.mx<f8E5M2>"));
  EXPECT_EQ(*bsq::getPackedByteShape(mxfp8, {7, 64}),
            (SmallVector<int64_t>{7, 64}));
}

TEST_F(BSQTypesTest, ScaleShape) {
  auto nvfp4 = cast<bsq::QuantizedTypeInterface>(parse("!bsq.nvfp4"));
  // ModelOpt NVFP4 expert weight [3072, 6144]: weight_scale is [3072, 384].
  EXPECT_EQ(*bsq::getScaleShape(nvfp4, {3072, 6144}),
            (SmallVector<int64_t>{3072, 384}));
  EXPECT_TRUE(failed(bsq::getScaleShape(nvfp4, {3072, 100})));
  auto mx = cast<bsq::QuantizedTypeInterface>(parse("!bsq.mx<f8E4M3FN>"));
  EXPECT_EQ(*bsq::getScaleShape(mx, {512, 6144}),
            (SmallVector<int64_t>{512, 192}));
  // Block FP8 tiles may be partial at the edges: ceil(300/128) = 3.
  auto blockFp8 = cast<bsq::QuantizedTypeInterface>(
      parse("!bsq.fp8<f8E4M3FN, block = [128, 128]>"));
  EXPECT_EQ(*bsq::getScaleShape(blockFp8, {300, 7168}),
            (SmallVector<int64_t>{3, 56}));
  EXPECT_TRUE(failed(bsq::getScaleShape(blockFp8, {7168})));
  auto perTensor = cast<bsq::QuantizedTypeInterface>(parse("!bsq.fp8<f8E4M3FN>"));
  EXPECT_TRUE(bsq::getScaleShape(perTensor, {5, 5})->empty());
}

TEST_F(BSQTypesTest, StorageBytes) {
  auto nvfp4 = cast<bsq::QuantizedTypeInterface>(parse("!bsq.nvfp4"));
  // One 128-channel head: 64 bytes of E2M1 pairs + 8 E4M3 scales (§4.4).
  EXPECT_EQ(*bsq::getStorageBytes(nvfp4, {128}), 72);
  auto nvfp4g =
      cast<bsq::QuantizedTypeInterface>(parse("!bsq.nvfp4<global_scale>"));
  EXPECT_EQ(*bsq::getStorageBytes(nvfp4g, {128}), 76);
  auto mx = cast<bsq::QuantizedTypeInterface>(parse("!bsq.mx<f8E4M3FN>"));
  EXPECT_EQ(*bsq::getStorageBytes(mx, {2, 64}), 2 * 64 + 2 * 2);
  auto perTensor = cast<bsq::QuantizedTypeInterface>(parse("!bsq.fp8<f8E4M3FN>"));
  EXPECT_EQ(*bsq::getStorageBytes(perTensor, {10, 10}), 100 + 4);
  EXPECT_TRUE(failed(
      bsq::getStorageBytes(nvfp4, {ShapedType::kDynamic, 128})));
}

TEST_F(BSQTypesTest, PagedCacheBytesPerTokenMatchSpec) {
  // msa-m3-spec.md §4.4, per layer: main K+V (2 caches of 4 heads x 128)
  // is 2048 B in BF16, 1024 B in FP8, 576 B in NVFP4; the index key (1
  // head) is 256, 128 and 72 B.
  auto mainK = [&](StringRef element) {
    return cast<msa::PagedCacheType>(
        parse(("!msa.paged_cache<heads = 4, page_size = 128, head_dim = "
               "128, " +
               element + ">")
                  .str()));
  };
  auto index = [&](StringRef element) {
    return cast<msa::PagedCacheType>(
        parse(("!msa.paged_cache<heads = 1, page_size = 128, head_dim = "
               "128, " +
               element + ">")
                  .str()));
  };
  EXPECT_EQ(2 * mainK("bf16").getBytesPerToken(), 2048);
  EXPECT_EQ(2 * mainK("f8E4M3FN").getBytesPerToken(), 1024);
  EXPECT_EQ(2 * mainK("!bsq.nvfp4").getBytesPerToken(), 576);
  EXPECT_EQ(index("bf16").getBytesPerToken(), 256);
  EXPECT_EQ(index("f8E4M3FN").getBytesPerToken(), 128);
  EXPECT_EQ(index("!bsq.nvfp4").getBytesPerToken(), 72);
}

TEST_F(BSQTypesTest, InvalidTypesAreRejected) {
  // Diagnostics are expected; keep them off stderr.
  ScopedDiagnosticHandler silence(&context, [](Diagnostic &) {
    return success();
  });
  EXPECT_FALSE(parse("!bsq.mx<bf16>"));
  EXPECT_FALSE(parse("!bsq.fp8<f8E4M3FN, block = [0]>"));
  EXPECT_FALSE(parse(
      "!msa.paged_cache<heads = 4, page_size = 128, head_dim = 8, !bsq.nvfp4>"));
  EXPECT_FALSE(parse("!msa.block_table<page_size = 0, max_blocks = ?>"));
}

} // namespace
