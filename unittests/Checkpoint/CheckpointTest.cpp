//===- CheckpointTest.cpp - Checkpoint folders and shards -----------------===//
//
// Part of msac. Bug case B48 (stray .safetensors next to indexed shards) and
// the sharded-index problems: missing shard, tensor named twice, tensor the
// index places in the wrong shard.
//
//===----------------------------------------------------------------------===//

#include "CheckpointFixtures.h"

#include "msac/Checkpoint/Checkpoint.h"
#include "msac/Checkpoint/SafetensorsWriter.h"

#include "gtest/gtest.h"

using namespace msac::ckpt;
using msac::test::describe;
using msac::test::replaceOnce;
using msac::test::TempDir;
using msac::test::writeFile;

namespace {

void writeShard(const std::string &path,
                const std::vector<std::string> &names) {
  SafetensorsWriter writer;
  for (const std::string &name : names)
    writer.add(name, DType::BF16, {2, 2});
  ASSERT_EQ(writer.write(path,
                         [](size_t, const SafetensorsWriter::Tensor &t,
                            std::FILE *out) {
                           std::string bytes(t.bytes, '\0');
                           std::fwrite(bytes.data(), 1, bytes.size(), out);
                         }),
            "");
}


const char *kIndex = R"({"metadata":{"total_size":32},"weight_map":{
  "a":"model-00001-of-00002.safetensors",
  "b":"model-00002-of-00002.safetensors"}})";

TEST(Checkpoint, B48StrayFilesNextToAnIndexAreIgnored) {
  TempDir dir;
  writeShard(dir.file("model-00001-of-00002.safetensors"), {"a"});
  writeShard(dir.file("model-00002-of-00002.safetensors"), {"b"});
  writeFile(dir.file("model.safetensors.index.json"), kIndex);
  // An NVFP4 copy with the same names, and a consolidated file.
  writeShard(dir.file("model.safetensors"), {"a", "b"});
  writeShard(dir.file("consolidated.safetensors"), {"a"});
  Diagnostics diags;
  auto ckpt = Checkpoint::open(dir.path, diags);
  ASSERT_TRUE(ckpt);
  EXPECT_FALSE(diags.hasErrors()) << describe(diags);
  EXPECT_EQ(diags.warningCount(), 2u) << describe(diags);
  EXPECT_TRUE(diags.contains("stray file"));
  EXPECT_EQ(ckpt->shards().size(), 2u);
  ASSERT_TRUE(ckpt->find("a"));
  EXPECT_NE(ckpt->find("a")->file->path().find("00001"), std::string::npos);
}

TEST(Checkpoint, B48WithoutIndexDuplicateNamesAreAnError) {
  TempDir dir;
  writeShard(dir.file("model.safetensors"), {"a", "b"});
  writeShard(dir.file("consolidated.safetensors"), {"a"});
  Diagnostics diags;
  auto ckpt = Checkpoint::open(dir.path, diags);
  EXPECT_TRUE(diags.hasErrors());
  EXPECT_TRUE(diags.contains("a tensor must live in exactly one shard"))
      << describe(diags);
}

TEST(Checkpoint, CopiedShardNamesThreeTensorsThenCounts) {
  // A copied shard repeats every tensor: three are named, the rest counted.
  TempDir dir;
  writeShard(dir.file("model.safetensors"), {"a", "b", "c", "d", "e", "f"});
  writeShard(dir.file("model-copy.safetensors"),
             {"a", "b", "c", "d", "e", "f"});
  Diagnostics diags;
  Checkpoint::open(dir.path, diags);
  EXPECT_EQ(diags.errorCount(), 4u) << describe(diags);
  EXPECT_TRUE(diags.contains("and 3 more tensors are also stored in"))
      << describe(diags);
}

TEST(Checkpoint, MissingShardAndMisplacedTensor) {
  TempDir dir;
  writeShard(dir.file("model-00001-of-00002.safetensors"), {"b"});
  writeFile(dir.file("model.safetensors.index.json"), kIndex);
  Diagnostics diags;
  auto ckpt = Checkpoint::open(dir.path, diags);
  EXPECT_TRUE(diags.contains("does not exist")) << describe(diags);
  EXPECT_TRUE(diags.contains("the shard does not contain it")) << describe(diags);
  EXPECT_TRUE(diags.contains("but the index places it in "
                            "model-00002-of-00002.safetensors"))
      << describe(diags);
}

TEST(Checkpoint, IndexProblems) {
  TempDir dir;
  writeShard(dir.file("s.safetensors"), {"a"});
  writeFile(dir.file("model.safetensors.index.json"),
            R"({"weight_map":{"a":"s.safetensors","a":"s.safetensors",
                "b":"../etc/passwd","c":7}})");
  Diagnostics diags;
  Checkpoint::open(dir.path, diags);
  EXPECT_TRUE(diags.contains("listed more than once")) << describe(diags);
  EXPECT_TRUE(diags.contains("must be a file name in the checkpoint folder"));
  EXPECT_TRUE(diags.contains("must be a shard file name"));

  TempDir broken;
  writeFile(broken.file("model.safetensors.index.json"), "{not json");
  Diagnostics d2;
  EXPECT_FALSE(Checkpoint::open(broken.path, d2));
  EXPECT_TRUE(d2.contains("is not valid JSON"));

  // A NUL byte would end nlohmann's parse silently, hiding the duplicate.
  TempDir nul;
  writeShard(nul.file("s.safetensors"), {"a"});
  writeFile(nul.file("model.safetensors.index.json"),
            std::string(R"({"weight_map":{"a":"s.safetensors"}})") + '\0' +
                R"({"weight_map":{"a":"s.safetensors","a":"x"}})");
  Diagnostics d3;
  EXPECT_FALSE(Checkpoint::open(nul.path, d3));
  EXPECT_TRUE(d3.contains("contains a NUL byte at offset 36")) << describe(d3);
}

TEST(Checkpoint, EmptyOrMissingFolder) {
  TempDir dir;
  Diagnostics diags;
  EXPECT_FALSE(Checkpoint::open(dir.path, diags));
  EXPECT_TRUE(diags.contains("holds no .safetensors files"));
  Diagnostics missing;
  EXPECT_FALSE(Checkpoint::open(dir.file("nope"), missing));
  EXPECT_TRUE(missing.contains("not a directory"));
}

TEST(Checkpoint, CorruptShardIsReportedWithItsPath) {
  TempDir dir;
  writeFile(dir.file("model.safetensors"), std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "xx");
  Diagnostics diags;
  auto ckpt = Checkpoint::open(dir.path, diags);
  ASSERT_TRUE(diags.hasErrors());
  EXPECT_EQ(diags.all()[0].file, dir.file("model.safetensors"));
}

} // namespace
