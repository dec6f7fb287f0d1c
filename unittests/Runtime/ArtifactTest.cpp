//===- ArtifactTest.cpp - Manifest launch shapes and versions -------------===//
//
// Part of msac's tests. Hand-written manifests of a GPU-only, weight-stripped
// artifact (no kernels file is opened at load): the per-kernel launch shapes
// of format version 2 (grid, block threads, dynamic shared-memory bytes),
// their validation, the refusal of version-1 artifacts, and (version 3) the
// steps' buffers checked against their kernel's parameters.
//
//===----------------------------------------------------------------------===//

#include "msac/Runtime/Artifact.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>

using namespace msac::runtime;

namespace {

/// A manifest of two kernels with one sm_90a target whose `launch.kernels`
/// is `kernels` (JSON text), at format version `version`.
std::string manifest(int version, const std::string &kernels) {
  return R"({"format": "msac-artifact", "format_version": )" +
         std::to_string(version) + R"(, "producer": "msac test",
  "model": {"model_type": "minimax_m3", "hidden_size": 64, "num_layers": 1,
            "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 32, "vocab_size": 128, "page_size": 128,
            "layers": [{"attention": "dense", "mlp": "dense"}]},
  "targets": [{"name": "sm_90a", "kernels_file": "kernels/sm_90a.cubin",
               "launch": {"grid": 528, "block": 128, "kernels": )" +
         kernels + R"(}}],
  "kernels": [{"name": "msac_k0_embedding", "params": []},
              {"name": "msac_k1_linear",
               "params": [{"kind": "activation", "dtype": "f32",
                           "shape": ["N", 128]}]}],
  "buffers": [{"kind": "activation", "name": "logits", "dtype": "f32",
               "shape": ["N", 128]}],
  "schedules": {"init": [],
                "prefill": [{"kernel": "msac_k1_linear", "buffers": [0]}],
                "decode": [{"kernel": "msac_k1_linear", "buffers": [0]}]},
  "outputs": [0],
  "weights": {"file": "weights.bin", "bytes": 0, "alignment": 4096,
              "stripped": true}})";
}

/// Writes `text` as the manifest of a fresh artifact folder and loads it.
std::unique_ptr<Artifact> load(const std::string &name, const std::string &text,
                               std::string &error) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("msac-artifact-test-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "manifest.json") << text;
  return Artifact::load(dir.string(), error);
}

const char *kTwoShapes =
    R"([{"name": "msac_k0_embedding", "grid": 528, "block": 128, "dynamic_shared_bytes": 0},
        {"name": "msac_k1_linear", "grid": 264, "block": 256,
         "dynamic_shared_bytes": 98304}])";

TEST(ArtifactLaunchShapes, EveryKernelHasItsOwn) {
  std::string error;
  auto a = load("shapes", manifest(kArtifactFormatVersion, kTwoShapes), error);
  ASSERT_TRUE(a) << error;
  const Target *t = a->findTarget("sm_90a");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->grid, 528);
  EXPECT_EQ(t->block, 128);
  ASSERT_EQ(t->kernelShapes.size(), 2u);
  KernelLaunchShape embedding = t->shapeOf("msac_k0_embedding");
  EXPECT_EQ(embedding.grid, 528);
  EXPECT_EQ(embedding.block, 128);
  EXPECT_EQ(embedding.dynamicSharedBytes, 0);
  KernelLaunchShape linear = t->shapeOf("msac_k1_linear");
  EXPECT_EQ(linear.grid, 264);
  EXPECT_EQ(linear.block, 256);
  EXPECT_EQ(linear.dynamicSharedBytes, 98304);
  // A kernel the target does not list gets the target's block.
  KernelLaunchShape other = t->shapeOf("msac_k9_other");
  EXPECT_EQ(other.grid, 528);
  EXPECT_EQ(other.block, 128);
  EXPECT_EQ(other.dynamicSharedBytes, 0);
}

/// Two kernels' shapes, the second with `"programmatic": value`.
std::string programmaticShapes(const std::string &value) {
  return R"([{"name": "msac_k0_embedding", "grid": 528, "block": 128,
              "dynamic_shared_bytes": 0},
             {"name": "msac_k1_linear", "grid": 264, "block": 256,
              "dynamic_shared_bytes": 0, "programmatic": )" +
         value + "}]";
}

TEST(ArtifactLaunchShapes, ProgrammaticIsOptional) {
  // Absent: an ordinary launch (kTwoShapes); true: a programmatic
  // dependent launch.
  std::string error;
  auto a =
      load("programmatic",
           manifest(kArtifactFormatVersion, programmaticShapes("true")), error);
  ASSERT_TRUE(a) << error;
  const Target *t = a->findTarget("sm_90a");
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->shapeOf("msac_k0_embedding").programmatic);
  EXPECT_TRUE(t->shapeOf("msac_k1_linear").programmatic);
  auto plain = load("not-programmatic",
                    manifest(kArtifactFormatVersion, kTwoShapes), error);
  ASSERT_TRUE(plain) << error;
  EXPECT_FALSE(
      plain->findTarget("sm_90a")->shapeOf("msac_k1_linear").programmatic);
}

TEST(ArtifactLaunchShapes, ClusterAndTokenBounds) {
  // Absent: no cluster, every step; a cluster of 8 launched in steps of
  // one token; another kernel in steps of two or more.
  const std::string shapes =
      R"([{"name": "msac_k0_embedding", "grid": 528, "block": 128,
           "dynamic_shared_bytes": 0, "min_tokens": 2},
          {"name": "msac_k1_linear", "grid": 64, "block": 128,
           "dynamic_shared_bytes": 0, "cluster": 8, "max_tokens": 1}])";
  std::string error;
  auto a = load("clusters", manifest(kArtifactFormatVersion, shapes), error);
  ASSERT_TRUE(a) << error;
  const Target *t = a->findTarget("sm_90a");
  ASSERT_TRUE(t);
  KernelLaunchShape embedding = t->shapeOf("msac_k0_embedding");
  KernelLaunchShape linear = t->shapeOf("msac_k1_linear");
  EXPECT_EQ(embedding.cluster, 1);
  EXPECT_EQ(linear.cluster, 8);
  EXPECT_FALSE(embedding.launchedAt(1));
  EXPECT_TRUE(embedding.launchedAt(2));
  EXPECT_TRUE(embedding.launchedAt(4096));
  EXPECT_TRUE(linear.launchedAt(1));
  EXPECT_FALSE(linear.launchedAt(2));
  auto plain =
      load("no-bounds", manifest(kArtifactFormatVersion, kTwoShapes), error);
  ASSERT_TRUE(plain) << error;
  KernelLaunchShape every =
      plain->findTarget("sm_90a")->shapeOf("msac_k1_linear");
  EXPECT_EQ(every.cluster, 1);
  EXPECT_TRUE(every.launchedAt(1));
  EXPECT_TRUE(every.launchedAt(1 << 20));
  // min > max > 0: never.
  KernelLaunchShape never;
  never.minTokens = 2;
  never.maxTokens = 1;
  EXPECT_FALSE(never.launchedAt(1));
  EXPECT_FALSE(never.launchedAt(2));
}

TEST(ArtifactLaunchShapes, ClustersMustTileTheGrid) {
  for (const char *bad :
       {R"("cluster": 9)", R"("cluster": 0)", R"("cluster": 5)",
        R"("min_tokens": 0)", R"("max_tokens": -1)"}) {
    const std::string shapes =
        std::string(R"([{"name": "msac_k0_embedding", "grid": 528,
                         "block": 128, "dynamic_shared_bytes": 0, )") +
        bad + "}]";
    std::string error;
    auto a =
        load("bad-cluster", manifest(kArtifactFormatVersion, shapes), error);
    EXPECT_FALSE(a) << bad;
    EXPECT_NE(error.find("expected a cluster of 1..8 CTAs dividing the grid"),
              std::string::npos)
        << bad << ": " << error;
  }
}

TEST(ArtifactLaunchShapes, ProgrammaticMustBeABoolean) {
  std::string error;
  auto a = load("programmatic-type",
                manifest(kArtifactFormatVersion, programmaticShapes("\"yes\"")),
                error);
  EXPECT_FALSE(a);
  EXPECT_NE(error.find("kernels[1].programmatic must be true or false"),
            std::string::npos)
      << error;
}

TEST(ArtifactLaunchShapes, VersionOneIsRefused) {
  std::string error;
  auto a = load("v1", manifest(1, kTwoShapes), error);
  EXPECT_FALSE(a);
  EXPECT_NE(error.find("artifact format version 1 (written by msac test), but "
                       "this runtime reads version " +
                       std::to_string(kArtifactFormatVersion) +
                       "; recompile the model with a matching msac"),
            std::string::npos)
      << error;
}

TEST(ArtifactLaunchShapes, MissingShapesAreMalformed) {
  std::string error;
  std::string text = manifest(kArtifactFormatVersion, kTwoShapes);
  text.replace(
      text.find(R"(, "kernels": [{"name": "msac_k0_embedding", "grid")"),
      std::string(R"(, "kernels": )").size() + std::string(kTwoShapes).size(),
      "");
  auto a = load("missing", text, error);
  EXPECT_FALSE(a);
  EXPECT_NE(error.find("malformed manifest"), std::string::npos) << error;
}

TEST(ArtifactLaunchShapes, OutOfRangeShapesAreRefused) {
  for (
      const char *bad :
      {R"([{"name": "msac_k0_embedding", "grid": 528, "block": 0, "dynamic_shared_bytes": 0},
            {"name": "msac_k1_linear", "grid": 264, "block": 256, "dynamic_shared_bytes": 0}])",
       R"([{"name": "msac_k0_embedding", "grid": 0, "block": 128, "dynamic_shared_bytes": 0},
            {"name": "msac_k1_linear", "grid": 264, "block": 256, "dynamic_shared_bytes": 0}])",
       R"([{"name": "msac_k0_embedding", "grid": 528, "block": 2048, "dynamic_shared_bytes": 0},
            {"name": "msac_k1_linear", "grid": 264, "block": 256, "dynamic_shared_bytes": 0}])",
       R"([{"name": "msac_k0_embedding", "grid": 528, "block": 128, "dynamic_shared_bytes": 0},
            {"name": "msac_k1_linear", "grid": 264, "block": 256,
             "dynamic_shared_bytes": 262144}])"}) {
    std::string error;
    auto a = load("range", manifest(kArtifactFormatVersion, bad), error);
    EXPECT_FALSE(a);
    EXPECT_NE(error.find("expected 1..2^31-1 CTAs, 1..1024 threads and "
                         "0..232448 bytes"),
              std::string::npos)
        << error;
  }
}

TEST(ArtifactLaunchShapes, ShapesMustFollowTheKernelList) {
  std::string error;
  auto a =
      load("order",
           manifest(kArtifactFormatVersion,
                    R"([{"name": "msac_k1_linear", "grid": 264, "block": 256,
                              "dynamic_shared_bytes": 0}])"),
           error);
  EXPECT_FALSE(a);
  EXPECT_NE(error.find("target sm_90a lists the launch shapes of 1 kernels, "
                       "which are not the manifest's 2 kernels in order"),
            std::string::npos)
      << error;
}

TEST(ArtifactKernelParams, StepsPassTheKernelsParameters) {
  std::string error;
  std::string text = manifest(kArtifactFormatVersion, kTwoShapes);
  // The same memory in another view ([N, 2, 64]) is the same parameter.
  std::string view = text;
  view.replace(view.find(R"("shape": ["N", 128]}]}])"),
               std::string(R"("shape": ["N", 128])").size(),
               R"("shape": ["N", 2, 64])");
  auto ok = load("view", view, error);
  EXPECT_TRUE(ok) << error;
  // Another dtype, or a step with one buffer more, is refused.
  std::string dtype = text;
  dtype.replace(dtype.find(R"("dtype": "f32",
                           "shape")"),
                std::string(R"("dtype": "f32")").size(), R"("dtype": "bf16")");
  auto a = load("dtype", dtype, error);
  EXPECT_FALSE(a);
  EXPECT_NE(error.find("schedules.prefill[0] passes buffer 0 ('logits', "
                       "activation f32 [N, 128]) as parameter 0 of kernel "
                       "msac_k1_linear, which takes activation bf16 [N, "
                       "128]; the artifact is corrupt, recompile the model"),
            std::string::npos)
      << error;
  std::string extra = text;
  extra.replace(
      extra.find(
          R"("prefill": [{"kernel": "msac_k1_linear", "buffers": [0]}])"),
      std::string(
          R"("prefill": [{"kernel": "msac_k1_linear", "buffers": [0]}])")
          .size(),
      R"("prefill": [{"kernel": "msac_k1_linear", "buffers": [0, 0]}])");
  a = load("extra", extra, error);
  EXPECT_FALSE(a);
  EXPECT_NE(error.find("schedules.prefill[0] passes 2 buffers to kernel "
                       "msac_k1_linear, which takes 1"),
            std::string::npos)
      << error;
}

} // namespace
