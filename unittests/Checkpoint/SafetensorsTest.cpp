//===- SafetensorsTest.cpp - safetensors header validation ----------------===//
//
// Part of msac. Covers bug cases B43, B44 and B46 (shared/cases/bug-cases.md
// family 6): every malformed file is rejected with an error naming the file
// and tensor, before any data is touched, and never crashes (this suite also
// runs under ASan/UBSan).
//
//===----------------------------------------------------------------------===//

#include "TestFiles.h"

#include "msac/Checkpoint/Safetensors.h"
#include "msac/Checkpoint/SafetensorsWriter.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cstring>

#include <sys/stat.h>

using namespace msac::ckpt;
using msac::test::rawLength;
using msac::test::safetensorsBytes;

namespace {

/// Parses `bytes` as a file called "f.safetensors".
bool parse(const std::string &bytes, Diagnostics &diags,
           SafetensorsHeader *out = nullptr) {
  SafetensorsHeader header;
  bool ok = parseSafetensorsHeader(
      "f.safetensors", reinterpret_cast<const uint8_t *>(bytes.data()),
      bytes.size(), header, diags);
  if (out)
    *out = header;
  return ok;
}

std::string errorsOf(const Diagnostics &diags) {
  std::string all;
  for (const Diagnostic &d : diags.all())
    all += d.file + " | " + d.subject + " | " + d.message + "\n";
  return all;
}

TEST(Safetensors, ValidFileParses) {
  std::string header = R"({"__metadata__":{"format":"pt"},)"
                       R"("a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[],"data_offsets":[8,12]}})";
  Diagnostics diags;
  SafetensorsHeader h;
  ASSERT_TRUE(parse(safetensorsBytes(header, std::string(12, 'x')), diags, &h))
      << errorsOf(diags);
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(h.tensors[1].numElements(), 1);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_EQ(h.dataOffset, 8 + header.size());
}

// B43 (a): [1000, 1000] F32 backed by 4 bytes.
TEST(Safetensors, B43OffsetsMustMatchShapeTimesDType) {
  Diagnostics diags;
  EXPECT_FALSE(parse(safetensorsBytes(
                         R"({"w":{"dtype":"F32","shape":[1000,1000],"data_offsets":[0,4]}})",
                         std::string(4, '\0')),
                     diags));
  EXPECT_TRUE(diags.contains("needs 4000000 bytes")) << errorsOf(diags);
  EXPECT_EQ(diags.all()[0].subject, "tensor 'w'");
}

// A shape whose byte count exceeds 64 bits is reported with its full size
// (2^62 x 4 BF16 values = 2^65 bytes), not a wrapped one.
TEST(Safetensors, ByteCountBeyond64Bits) {
  Diagnostics diags;
  EXPECT_FALSE(parse(safetensorsBytes(
                         R"({"w":{"dtype":"BF16","shape":[4611686018427387904,4],"data_offsets":[0,4]}})",
                         std::string(4, '\0')),
                     diags));
  EXPECT_TRUE(diags.contains("needs 36893488147419103232 bytes"))
      << errorsOf(diags);
}

// B43 (b): valid offsets, file truncated to 82 bytes.
TEST(Safetensors, B43TruncatedFile) {
  std::string header =
      R"({"w":{"dtype":"F32","shape":[64],"data_offsets":[0,256]}})";
  std::string full = safetensorsBytes(header, std::string(256, '\0'));
  Diagnostics diags;
  EXPECT_FALSE(parse(full.substr(0, 82), diags));
  EXPECT_TRUE(diags.contains("past the end of the data section"))
      << errorsOf(diags);
}

// B43 (c): unknown dtype string and begin beyond the end of the file.
TEST(Safetensors, B43UnknownDType) {
  Diagnostics diags;
  EXPECT_FALSE(parse(safetensorsBytes(
                         R"({"w":{"dtype":"Q4_K","shape":[4],"data_offsets":[9999,10003]}})",
                         ""),
                     diags));
  EXPECT_TRUE(diags.contains("unknown dtype 'Q4_K'")) << errorsOf(diags);
  EXPECT_TRUE(diags.contains("past the end of the data section"));
}

// B43 (d): packed FP4 stored as U8 with the last dimension halved loads, its
// byte count the product of the stored U8 shape.
TEST(Safetensors, B43PackedFP4AsU8) {
  Diagnostics diags;
  SafetensorsHeader h;
  ASSERT_TRUE(parse(safetensorsBytes(
                        R"({"w":{"dtype":"U8","shape":[8,16],"data_offsets":[0,128]}})",
                        std::string(128, '\x21')),
                    diags, &h))
      << errorsOf(diags);
  EXPECT_EQ(h.tensors[0].numBytes(), 8u * 16u);
  // The F4 dtype counts elements: 32 values take 16 bytes.
  Diagnostics d2;
  EXPECT_TRUE(parse(safetensorsBytes(
                        R"({"w":{"dtype":"F4","shape":[32],"data_offsets":[0,16]}})",
                        std::string(16, '\0')),
                    d2))
      << errorsOf(d2);
  Diagnostics d3;
  EXPECT_FALSE(parse(safetensorsBytes(
                         R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})",
                         std::string(2, '\0')),
                     d3));
  EXPECT_TRUE(d3.contains("does not fill whole bytes"));
}

// B44: header lengths that would wrap an allocation or overrun the file.
TEST(Safetensors, B44HeaderLength) {
  const size_t size = 1024;
  for (uint64_t n : {uint64_t(0xFFFFFFFFFFFFFFFCull), uint64_t(0x7FFFFFFFFFFFFFFFull),
                     uint64_t(size - 7), uint64_t(100000001), uint64_t(0)}) {
    Diagnostics diags;
    EXPECT_FALSE(parse(rawLength(n, size), diags)) << n;
    ASSERT_TRUE(diags.hasErrors()) << n;
    EXPECT_EQ(diags.all()[0].file, "f.safetensors");
  }
  Diagnostics tiny;
  EXPECT_FALSE(parse(std::string(5, '\0'), tiny));
  EXPECT_TRUE(tiny.contains("too short")) << errorsOf(tiny);
  Diagnostics huge;
  EXPECT_FALSE(parse(rawLength(100000001, size), huge));
  EXPECT_TRUE(huge.contains("exceeds the 100 MB limit"));
}

// B46: malformed data_offsets.
TEST(Safetensors, B46BadOffsets) {
  for (const char *offsets :
       {"[]", "[8]", "[-1,4]", R"(["0","4"])", "[0,18446744073709551616]",
        "[0,4,8]", "null", "{}", "[0.0,4.0]"}) {
    Diagnostics diags;
    std::string header = std::string(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":)") +
                         offsets + "}}";
    EXPECT_FALSE(parse(safetensorsBytes(header, std::string(4, '\0')), diags))
        << offsets;
    EXPECT_TRUE(diags.contains("'data_offsets' must be two non-negative"))
        << offsets << "\n"
        << errorsOf(diags);
  }
  Diagnostics inverted;
  EXPECT_FALSE(parse(safetensorsBytes(
                         R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[16,8]}})",
                         std::string(16, '\0')),
                     inverted));
  EXPECT_TRUE(inverted.contains("are inverted")) << errorsOf(inverted);
}

TEST(Safetensors, B46RootAndNames) {
  Diagnostics notObject;
  EXPECT_FALSE(parse(safetensorsBytes("[1,2]", ""), notObject));
  EXPECT_TRUE(notObject.contains("must be a JSON object"));

  Diagnostics badJson;
  EXPECT_FALSE(parse(safetensorsBytes("{\"w\":", ""), badJson));
  EXPECT_TRUE(badJson.contains("not valid JSON"));

  Diagnostics nul;
  EXPECT_FALSE(parse(safetensorsBytes(std::string("{}") + '\0' + "xx", ""), nul));
  EXPECT_TRUE(nul.contains("header contains a NUL byte at offset 2"))
      << errorsOf(nul);

  Diagnostics duplicate;
  EXPECT_FALSE(parse(
      safetensorsBytes(
          R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
          R"("w":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
          std::string(8, '\0')),
      duplicate));
  EXPECT_TRUE(duplicate.contains("appears more than once"))
      << errorsOf(duplicate);

  Diagnostics metadata;
  EXPECT_FALSE(parse(
      safetensorsBytes(R"({"__metadata__":{"format":"pt","step":3}})", ""),
      metadata));
  EXPECT_TRUE(metadata.contains("value of 'step' must be a string"));

  Diagnostics badShape;
  EXPECT_FALSE(parse(safetensorsBytes(
                         R"({"w":{"dtype":"U8","shape":[-4],"data_offsets":[0,4]}})",
                         std::string(4, '\0')),
                     badShape));
  EXPECT_TRUE(badShape.contains("'shape' must be an array"));
}

TEST(Safetensors, B46OverlapHoleAndTail) {
  Diagnostics overlap;
  EXPECT_FALSE(parse(
      safetensorsBytes(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})",
                       std::string(12, '\0')),
      overlap));
  EXPECT_TRUE(overlap.contains("overlap tensor 'a'")) << errorsOf(overlap);

  Diagnostics hole;
  EXPECT_FALSE(parse(
      safetensorsBytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})",
                       std::string(12, '\0')),
      hole));
  EXPECT_TRUE(hole.contains("belong to no tensor (a hole)")) << errorsOf(hole);

  Diagnostics tail;
  EXPECT_FALSE(parse(safetensorsBytes(
                         R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                         std::string(6, '\0')),
                     tail));
  EXPECT_TRUE(tail.contains("2 trailing bytes")) << errorsOf(tail);
}

TEST(Safetensors, ReportsEveryProblemAtOnce) {
  Diagnostics diags;
  EXPECT_FALSE(parse(
      safetensorsBytes(R"({"a":{"dtype":"Q8","shape":[4],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4]},)"
                       R"("c":{"dtype":"F32","shape":[4],"data_offsets":[0,4]}})",
                       std::string(4, '\0')),
      diags));
  EXPECT_EQ(diags.errorCount(), 3u) << errorsOf(diags);
}

TEST(Safetensors, GitLfsPointer) {
  Diagnostics diags;
  EXPECT_FALSE(parse("version https://git-lfs.github.com/spec/v1\noid sha256:"
                     "abc\nsize 123\n",
                     diags));
  EXPECT_TRUE(diags.contains("Git LFS pointer"));
}

TEST(Safetensors, WriterRoundTripsThroughMappedReader) {
  msac::test::TempDir dir;
  SafetensorsWriter writer;
  writer.add("x", DType::BF16, {3, 5});
  writer.add("s", DType::F32, {});
  std::string path = dir.file("w.safetensors");
  ASSERT_EQ(writer.write(path,
                         [](size_t index, const SafetensorsWriter::Tensor &t,
                            std::FILE *out) {
                           std::string bytes(t.bytes, static_cast<char>(index + 1));
                           std::fwrite(bytes.data(), 1, bytes.size(), out);
                         }),
            "");
  Diagnostics diags;
  auto file = SafetensorsFile::open(path, diags);
  ASSERT_TRUE(file) << errorsOf(diags);
  const TensorInfo *x = file->find("x");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->numBytes(), 30u);
  EXPECT_EQ(file->data(*x)[29], 1);
  EXPECT_EQ(file->data(*file->find("s"))[0], 2);
  EXPECT_EQ((8 + (file->data(*x) - file->data(*x))) % 8, 0u);
  // Data section is 8-byte aligned.
  EXPECT_EQ(x->begin, 0u);
}

TEST(Safetensors, OpenReportsMissingAndEmptyFiles) {
  msac::test::TempDir dir;
  Diagnostics missing;
  EXPECT_FALSE(SafetensorsFile::open(dir.file("nope.safetensors"), missing));
  EXPECT_TRUE(missing.contains("cannot open"));
  msac::test::writeFile(dir.file("empty.safetensors"), "");
  Diagnostics empty;
  EXPECT_FALSE(SafetensorsFile::open(dir.file("empty.safetensors"), empty));
  EXPECT_TRUE(empty.contains("too short"));
  Diagnostics folder;
  EXPECT_FALSE(SafetensorsFile::open(dir.path, folder));
  EXPECT_TRUE(folder.contains("not a regular file"));
}

} // namespace

namespace {
TEST(Safetensors, HugeShapesDoNotWrap) {
  // [2^62, 2^62] BF16 would wrap a 128-bit product; it must be refused.
  Diagnostics diags;
  EXPECT_FALSE(parse(safetensorsBytes(
                         R"({"w":{"dtype":"BF16","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})",
                         ""),
                     diags));
  EXPECT_TRUE(diags.contains("is too large")) << errorsOf(diags);
}

TEST(Safetensors, FifoIsNotOpened) {
  msac::test::TempDir dir;
  std::string path = dir.file("model.safetensors");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  Diagnostics diags;
  EXPECT_FALSE(SafetensorsFile::open(path, diags));
  EXPECT_TRUE(diags.contains("not a regular file"));
}

TEST(Safetensors, ManyTensorsParseInLinearTime) {
  // 50,000 entries (the real M3 NVFP4 checkpoint has about 67,000 in one
  // shard) must parse quickly; a quadratic parser takes minutes.
  std::string header = "{";
  for (int i = 0; i < 50000; ++i)
    header += (i ? "," : "") + std::string("\"t") + std::to_string(i) +
              "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}";
  header += "}";
  Diagnostics diags;
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(parse(safetensorsBytes(header, ""), diags)) << errorsOf(diags);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  EXPECT_LT(seconds, 10.0);
}
} // namespace
