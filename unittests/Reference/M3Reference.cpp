//===- M3Reference.cpp - Plain C++ reference of the MiniMax-M3 model ------===//
//
// Part of msac's tests.
//
//===----------------------------------------------------------------------===//

#include "M3Reference.h"

#include "msac/Checkpoint/Checkpoint.h"
#include "msac/Checkpoint/ModelWeights.h"
#include "msac/Numerics/LowPrecision.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

using namespace msac;
using namespace msac::reference;
using ckpt::DType;
using ckpt::WeightFormat;

float msac::reference::roundBF16(float x) {
  return numerics::bf16ToFloat(numerics::floatToBF16(x));
}

//===----------------------------------------------------------------------===//
// Cache formats
//===----------------------------------------------------------------------===//

void msac::reference::quantizeNVFP4Block(const float *x, uint8_t &scale,
                                         uint8_t *codes) {
  float amax = 0;
  for (int i = 0; i < 16; ++i)
    amax = std::isnan(x[i]) || std::isnan(amax)
               ? std::numeric_limits<float>::quiet_NaN()
               : std::max(amax, std::fabs(x[i]));
  scale = numerics::floatToE4M3(amax / 6.0f);
  const float s = numerics::e4m3ToFloat(scale);
  for (int i = 0; i < 16; ++i)
    codes[i] = s == 0 ? 0 : numerics::floatToE2M1(x[i] / s);
}

float msac::reference::dequantizeNVFP4ToFP8(uint8_t code, uint8_t scale) {
  float v = numerics::e2m1ToFloat(code) * numerics::e4m3ToFloat(scale);
  if (!std::isnan(v))
    v = std::min(448.0f, std::max(-448.0f, v));
  return numerics::e4m3ToFloat(numerics::floatToE4M3(v));
}

void msac::reference::roundTripCache(float *x, int64_t n, CacheFormat format) {
  switch (format) {
  case CacheFormat::BF16:
    return;
  case CacheFormat::FP8:
    for (int64_t i = 0; i < n; ++i)
      x[i] = numerics::e4m3ToFloat(numerics::floatToE4M3(x[i]));
    return;
  case CacheFormat::NVFP4:
    for (int64_t block = 0; block < n; block += 16) {
      uint8_t scale, codes[16];
      quantizeNVFP4Block(x + block, scale, codes);
      for (int i = 0; i < 16; ++i)
        x[block + i] = dequantizeNVFP4ToFP8(codes[i], scale);
    }
    return;
  }
}

int64_t msac::reference::cacheRowBytes(CacheFormat format, int64_t dim) {
  switch (format) {
  case CacheFormat::BF16:
    return 2 * dim;
  case CacheFormat::FP8:
    return dim;
  case CacheFormat::NVFP4:
    return dim / 2 + dim / 16;
  }
  return 0;
}

/// The difference two implementations' cached values may show beyond one
/// step of the format, relative to the largest value of their 16: a few
/// BF16 ulps (2^-8 each) of upstream rounding drift in the vector, which
/// RoPE's rotations carry from its large values onto its small ones (whose
/// FP8 steps are far finer than a BF16 ulp of the large ones).
constexpr float kCacheDrift = 1.0f / 64;

/// The spacing of the values of `format` at magnitude `x`: BF16 2^(e-7)
/// for x in [2^e, 2^(e+1)); E4M3 2^(e-3), 2^-9 among subnormals; NVFP4 the
/// E2M1 spacing (0.5 below 2, 1 below 4, else 2, in units of the block
/// scale `scale`) plus one E4M3 step, since the value is read as E4M3.
static float formatStep(CacheFormat format, float x, float scale) {
  int exponent;
  std::frexp(std::fabs(x), &exponent); // |x| in [2^(exponent-1), 2^exponent)
  const float e4m3 = std::ldexp(1.0f, std::max(exponent - 1, -6) - 3);
  switch (format) {
  case CacheFormat::BF16:
    return std::ldexp(1.0f, std::max(exponent - 1, -126) - 7);
  case CacheFormat::FP8:
    return e4m3;
  case CacheFormat::NVFP4: {
    const float codes = scale > 0 ? std::fabs(x) / scale : INFINITY;
    return (codes <= 2 ? 0.5f : codes <= 4 ? 1.0f : 2.0f) * scale + e4m3;
  }
  }
  return 0;
}

CacheRowComparison msac::reference::compareCacheRow(CacheFormat format,
                                                    const float *own,
                                                    const uint8_t *other,
                                                    int64_t dim,
                                                    float *otherValues) {
  CacheRowComparison result;
  for (int64_t block = 0; block < dim; block += 16) {
    const int64_t n = std::min<int64_t>(16, dim - block);
    // The reference's stored values and the other's, as read.
    float mine[16];
    std::copy(own + block, own + block + n, mine);
    float *theirs = otherValues + block;
    float scale = 0;
    switch (format) {
    case CacheFormat::BF16:
      for (int64_t i = 0; i < n; ++i)
        theirs[i] = numerics::bf16ToFloat(static_cast<uint16_t>(
            other[2 * (block + i)] | other[2 * (block + i) + 1] << 8));
      break;
    case CacheFormat::FP8:
      for (int64_t i = 0; i < n; ++i)
        theirs[i] = numerics::e4m3ToFloat(other[block + i]);
      break;
    case CacheFormat::NVFP4: {
      // The scales must be the same E4M3 value or adjacent ones.
      uint8_t mineScale, codes[16];
      quantizeNVFP4Block(own + block, mineScale, codes);
      const uint8_t theirScale = other[dim / 2 + block / 16];
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = block + i;
        theirs[i] = dequantizeNVFP4ToFP8(other[c / 2] >> (c % 2 ? 4 : 0) & 15,
                                         theirScale);
      }
      const float a = numerics::e4m3ToFloat(mineScale),
                  b = numerics::e4m3ToFloat(theirScale);
      scale = std::max(a, b);
      const int distance = std::abs((mineScale & 127) - (theirScale & 127));
      result.admissible &=
          !std::isnan(scale) && (theirScale & 128) == 0 && distance <= 1;
      break;
    }
    }
    roundTripCache(mine, n, format);
    float amax = 0;
    for (int64_t i = 0; i < n; ++i)
      amax = std::max(amax, std::fabs(mine[i]));
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(mine[i]) || std::isnan(theirs[i])) {
        result.differing += std::isnan(mine[i]) != std::isnan(theirs[i]);
        result.admissible &= std::isnan(mine[i]) == std::isnan(theirs[i]);
        continue;
      }
      if (mine[i] == theirs[i])
        continue;
      ++result.differing;
      const float larger = std::max(std::fabs(mine[i]), std::fabs(theirs[i]));
      result.admissible &=
          std::fabs(mine[i] - theirs[i]) <=
          formatStep(format, larger, scale) + kCacheDrift * amax;
    }
  }
  return result;
}

static std::vector<float> roundAll(std::vector<float> v) {
  for (float &x : v)
    x = roundBF16(x);
  return v;
}

//===----------------------------------------------------------------------===//
// MSA pieces
//===----------------------------------------------------------------------===//

std::vector<float>
msac::reference::blockScores(const float *q, const float *keys, int64_t numKeys,
                             int64_t dim, int64_t position, int64_t blockSize) {
  const int64_t last = std::min(position, numKeys - 1);
  std::vector<float> scores(last / blockSize + 1,
                            -std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j <= last; ++j) {
    float dot = 0;
    for (int64_t c = 0; c < dim; ++c)
      dot += q[c] * keys[j * dim + c];
    float s = dot;
    float &best = scores[j / blockSize];
    if (!std::isnan(s) && s > best) // a NaN token score never wins
      best = s;
  }
  return scores;
}

std::vector<int32_t>
msac::reference::selectBlocks(const std::vector<float> &scores,
                              int64_t position, int64_t k, int64_t blockSize,
                              int64_t local, int64_t init) {
  const int64_t L = position / blockSize;
  const int64_t n = L + 1;
  std::vector<int32_t> out;
  if (n <= k) {
    for (int64_t b = 0; b <= L; ++b)
      out.push_back(static_cast<int32_t>(b));
  } else {
    for (int64_t b = 0; b < init; ++b)
      out.push_back(static_cast<int32_t>(b));
    std::vector<int32_t> candidates;
    for (int64_t b = init; b <= L - local; ++b)
      candidates.push_back(static_cast<int32_t>(b));
    auto key = [&](int32_t b) {
      float s = b < static_cast<int64_t>(scores.size()) ? scores[b] : -INFINITY;
      return std::isnan(s) ? -INFINITY : s;
    };
    // Score descending; the lower block id wins a tie.
    std::sort(candidates.begin(), candidates.end(), [&](int32_t a, int32_t b) {
      return key(a) != key(b) ? key(a) > key(b) : a < b;
    });
    for (int64_t i = 0;
         i < k - init - local && i < static_cast<int64_t>(candidates.size());
         ++i)
      out.push_back(candidates[i]);
    for (int64_t b = L - local + 1; b <= L; ++b)
      out.push_back(static_cast<int32_t>(b));
  }
  out.resize(k, -1);
  return out;
}

bool msac::reference::followBlocks(const std::vector<float> &scores,
                                   int64_t position, int64_t blockSize,
                                   float lastChosen, double bound,
                                   const std::vector<int32_t> &other,
                                   std::vector<int32_t> &blocks) {
  const int64_t last = position / blockSize;
  const double scale = std::max(1.0f, std::fabs(lastChosen));
  if (other.size() != blocks.size())
    return false;
  // Blocks in both lists (the forced local and init blocks among them)
  // need no check; each other one must be a real block within the bound.
  for (int32_t b : other)
    if (std::find(blocks.begin(), blocks.end(), b) == blocks.end() &&
        (b < 0 || b > last || (lastChosen - scores[b]) / scale > bound))
      return false;
  std::vector<int32_t> a = other, mine = blocks;
  std::sort(a.begin(), a.end());
  std::sort(mine.begin(), mine.end());
  if (a == mine)
    return false;
  blocks = other;
  return true;
}

bool msac::reference::followExperts(const std::vector<float> &biased, int64_t k,
                                    double bound,
                                    const std::vector<int32_t> &other,
                                    std::vector<int64_t> &order) {
  const int64_t n = static_cast<int64_t>(biased.size());
  if (static_cast<int64_t>(other.size()) != k || k < 1 || k > n)
    return false;
  const float kth = biased[order[k - 1]];
  for (int32_t e : other)
    if (e < 0 || e >= n || kth - biased[e] > bound)
      return false;
  std::vector<int64_t> chosen(order.begin(), order.begin() + k);
  std::vector<int64_t> want(other.begin(), other.end());
  std::sort(chosen.begin(), chosen.end());
  std::sort(want.begin(), want.end());
  if (chosen == want)
    return false;
  std::sort(want.begin(), want.end(), [&](int64_t a, int64_t b) {
    return biased[a] != biased[b] ? biased[a] > biased[b] : a < b;
  });
  std::copy(want.begin(), want.end(), order.begin());
  return true;
}

float msac::reference::attend(const float *q, const float *keys,
                              const float *values, int64_t numKeys, int64_t dim,
                              int64_t position, float scale,
                              const std::vector<int32_t> *blocks,
                              int64_t blockSize, float *out) {
  std::vector<int64_t> visible;
  const int64_t last = std::min(position, numKeys - 1);
  if (!blocks) {
    for (int64_t j = 0; j <= last; ++j)
      visible.push_back(j);
  } else {
    std::vector<int32_t> sorted(*blocks);
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    for (int32_t b : sorted) {
      if (b < 0)
        continue;
      for (int64_t j = int64_t(b) * blockSize;
           j < (int64_t(b) + 1) * blockSize && j <= last; ++j)
        visible.push_back(j);
    }
  }
  std::fill(out, out + dim, 0.0f);
  if (visible.empty())
    return -INFINITY;
  // FP32 throughout (§3.2): scores, max, exponentials, sums.
  std::vector<float> z(visible.size());
  float zmax = -INFINITY;
  for (size_t i = 0; i < visible.size(); ++i) {
    float dot = 0;
    for (int64_t c = 0; c < dim; ++c)
      dot += q[c] * keys[visible[i] * dim + c];
    z[i] = dot * scale;
    zmax = std::max(zmax, z[i]);
  }
  float sum = 0;
  for (float &zi : z) {
    zi = std::exp(zi - zmax);
    sum += zi;
  }
  for (int64_t c = 0; c < dim; ++c) {
    float acc = 0;
    for (size_t i = 0; i < visible.size(); ++i)
      acc += z[i] * values[visible[i] * dim + c];
    out[c] = acc / sum;
  }
  return zmax + std::log(sum);
}

float msac::reference::attendQ8(const float *q, const float *keys,
                                const float *values, int64_t numKeys,
                                int64_t dim, int64_t position, float scale,
                                const std::vector<int32_t> *blocks,
                                int64_t blockSize, float *out) {
  const int64_t last = std::min(position, numKeys - 1);
  std::vector<int32_t> order;
  if (blocks)
    order = *blocks;
  else
    for (int64_t b = 0; b <= last / blockSize; ++b)
      order.push_back(int32_t(b));
  std::vector<float> qe(dim);
  for (int64_t c = 0; c < dim; ++c)
    qe[c] = numerics::e4m3ToFloat(numerics::floatToE4M3(q[c]));
  std::vector<float> acc(dim, 0.0f);
  float m = -INFINITY, sum = 0;
  for (int32_t b : order) {
    if (b < 0)
      continue;
    std::vector<int64_t> keysOf;
    for (int64_t j = int64_t(b) * blockSize;
         j < (int64_t(b) + 1) * blockSize && j <= last; ++j)
      keysOf.push_back(j);
    if (keysOf.empty())
      continue;
    std::vector<float> z(keysOf.size());
    float mNew = m;
    for (size_t i = 0; i < keysOf.size(); ++i) {
      float dot = 0;
      for (int64_t c = 0; c < dim; ++c)
        dot += qe[c] * keys[keysOf[i] * dim + c];
      z[i] = dot * scale;
      // A NaN score makes the maximum NaN (as the kernels' maximumf).
      mNew = std::isnan(mNew) || std::isnan(z[i]) ? NAN : std::max(mNew, z[i]);
    }
    // The block's maximum first, so that every P below is at most 448.
    const float alpha = m == -INFINITY ? 0.0f : std::exp(m - mNew);
    for (float &a : acc)
      a *= alpha;
    sum *= alpha;
    for (size_t i = 0; i < keysOf.size(); ++i) {
      const float p = 448.0f * std::exp(z[i] - mNew);
      const float p8 = numerics::e4m3ToFloat(numerics::floatToE4M3(p));
      for (int64_t c = 0; c < dim; ++c)
        acc[c] += p8 * values[keysOf[i] * dim + c];
      sum += p;
    }
    m = mNew;
  }
  // No visible key: output 0 and LSE -inf; a NaN sum stays NaN.
  const bool none = !(sum > 0) && !std::isnan(sum);
  for (int64_t c = 0; c < dim; ++c)
    out[c] = none ? 0.0f : acc[c] / sum;
  return none ? -INFINITY : m + std::log(sum / 448.0f);
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

static float decodeFloat(DType dtype, const uint8_t *p) {
  switch (dtype) {
  case DType::BF16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return numerics::bf16ToFloat(h);
  }
  case DType::F16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return numerics::f16ToFloat(h);
  }
  case DType::F32: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  case DType::F8_E4M3:
    return numerics::e4m3ToFloat(*p);
  case DType::F8_E5M2:
    return numerics::e5m2ToFloat(*p);
  case DType::F8_E8M0:
  case DType::U8:
    return numerics::e8m0ToFloat(*p);
  default:
    return NAN;
  }
}

/// Expands a resolved weight to float values of its logical shape.
static std::vector<float> dequantize(const ckpt::ResolvedWeight &w,
                                     const ckpt::Checkpoint &ckpt,
                                     const ckpt::ModelConfig &config) {
  const ckpt::Checkpoint::Entry *data = ckpt.find(w.data);
  const uint8_t *bytes = data->file->data(*data->info);
  int64_t numel = 1;
  for (int64_t d : w.shape)
    numel *= d;
  std::vector<float> out(numel);
  const int64_t cols = w.shape.back();
  if (w.format == WeightFormat::Float) {
    const int64_t size = ckpt::dtypeBits(w.dtype) / 8;
    for (int64_t i = 0; i < numel; ++i)
      out[i] = decodeFloat(w.dtype, bytes + i * size);
    return out;
  }
  const ckpt::Checkpoint::Entry *scale = ckpt.find(w.scale);
  const uint8_t *scaleBytes = scale->file->data(*scale->info);
  const int64_t scaleSize = ckpt::dtypeBits(w.scaleDType) / 8;
  auto scaleAt = [&](int64_t index) {
    const uint8_t *p = scaleBytes + index * scaleSize;
    if (w.scaleDType == DType::U8 && (w.format == WeightFormat::NVFP4))
      return numerics::e4m3ToFloat(*p); // NVFP4 scales stored as bytes
    return decodeFloat(w.scaleDType, p);
  };
  float global = 1.0f;
  if (!w.globalScale.empty()) {
    const ckpt::Checkpoint::Entry *g = ckpt.find(w.globalScale);
    std::memcpy(&global, g->file->data(*g->info), 4);
    if (w.globalScaleIsDivisor)
      global = 1.0f / global;
  }
  const bool fourBit =
      w.format == WeightFormat::NVFP4 || w.format == WeightFormat::MXFP4;
  for (int64_t i = 0; i < numel; ++i) {
    const int64_t row = i / cols, col = i % cols;
    float value;
    if (fourBit) {
      uint8_t byte = bytes[i / 2]; // element 2i in the low nibble
      value = numerics::e2m1ToFloat(i % 2 ? byte >> 4 : byte & 0xF);
    } else {
      value = decodeFloat(w.dtype, bytes + i);
    }
    float s;
    switch (w.format) {
    case WeightFormat::NVFP4:
      s = scaleAt(row * (cols / 16) + col / 16);
      break;
    case WeightFormat::MXFP8:
    case WeightFormat::MXFP4:
      s = scaleAt(row * (cols / 32) + col / 32);
      break;
    case WeightFormat::FP8Block: {
      const std::vector<int64_t> &tile = config.quantization.weightBlockSize;
      int64_t bm = tile.size() == 2 ? tile[0] : 128;
      int64_t bn = tile.size() == 2 ? tile[1] : 128;
      s = scaleAt((row / bm) * ((cols + bn - 1) / bn) + col / bn);
      break;
    }
    default:
      s = scaleAt(0);
    }
    out[i] = value * s * global;
  }
  return out;
}

std::unique_ptr<M3Reference>
M3Reference::load(const std::string &dir, ckpt::Diagnostics &diags,
                  std::optional<ckpt::WeightRecipe> recipe) {
  std::unique_ptr<M3Reference> ref(new M3Reference());
  std::optional<ckpt::ModelConfig> config = ckpt::readModelConfig(dir, diags);
  if (!config)
    return nullptr;
  ref->cfg = *config;
  std::unique_ptr<ckpt::Checkpoint> checkpoint =
      ckpt::Checkpoint::open(dir, diags);
  if (!checkpoint || diags.hasErrors())
    return nullptr;
  if (recipe &&
      !ckpt::quantizeCheckpointWeights(ref->cfg, *checkpoint, *recipe, diags))
    return nullptr;
  std::optional<ckpt::ModelWeights> resolved =
      ckpt::resolveWeights(ref->cfg, *checkpoint, diags);
  if (!resolved)
    return nullptr;
  for (const auto &[name, weight] : resolved->byName)
    ref->weights[name] = dequantize(weight, *checkpoint, ref->cfg);
  return ref;
}

M3Reference::Sequence M3Reference::newSequence() const {
  Sequence seq;
  seq.keys.resize(cfg.numLayers * cfg.numKVHeads);
  seq.values.resize(cfg.numLayers * cfg.numKVHeads);
  seq.indexKeys.resize(cfg.numLayers);
  return seq;
}

const std::vector<float> &M3Reference::w(const std::string &name) const {
  return weights.at(name);
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

std::vector<float> M3Reference::matvec(const std::vector<float> &x,
                                       const std::string &weight,
                                       int64_t n) const {
  const std::vector<float> &m = w(weight);
  const int64_t k = static_cast<int64_t>(x.size());
  std::vector<float> y(n);
  for (int64_t r = 0; r < n; ++r) {
    float acc = 0;
    for (int64_t c = 0; c < k; ++c)
      acc += x[c] * m[r * k + c];
    y[r] = static_cast<float>(acc);
  }
  return y;
}

std::vector<float> M3Reference::rmsNorm(const std::vector<float> &x,
                                        const std::string &weight) const {
  // FP32 (§1.4): y = x / sqrt(mean(x^2) + eps) * (1 + w).
  const std::vector<float> &g = w(weight);
  const int64_t dim = static_cast<int64_t>(g.size());
  std::vector<float> y(x.size());
  for (size_t start = 0; start < x.size(); start += dim) {
    float ss = 0;
    for (int64_t i = 0; i < dim; ++i)
      ss += x[start + i] * x[start + i];
    float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) +
                                 static_cast<float>(cfg.rmsNormEps));
    for (int64_t i = 0; i < dim; ++i) {
      float scale = cfg.gemmaNorm ? g[i] + 1.0f : g[i];
      y[start + i] = roundBF16(x[start + i] * inv * scale);
    }
  }
  return y;
}

void M3Reference::rope(float *head, int64_t position) const {
  // FP32 angles (NeoX pairing, §1.4): channel i pairs with i + r/2.
  const int64_t half = cfg.rotaryDim / 2;
  for (int64_t i = 0; i < half; ++i) {
    float invFreq = static_cast<float>(
        std::pow(cfg.ropeTheta, -2.0 * static_cast<double>(i) / cfg.rotaryDim));
    float angle = static_cast<float>(position) * invFreq;
    float c = std::cos(angle), s = std::sin(angle);
    float a = head[i], b = head[i + half];
    head[i] = roundBF16(a * c - b * s);
    head[i + half] = roundBF16(b * c + a * s);
  }
}

static float swiglu(float gate, float up, float alpha, float limit) {
  float g = std::min(gate, limit);
  float u = std::min(std::max(up, -limit), limit);
  return (u + 1.0f) * g * (1.0f / (1.0f + std::exp(-(alpha * g))));
}

std::vector<float> M3Reference::swigluMlp(const std::vector<float> &x,
                                          const std::string &gate,
                                          const std::string &up,
                                          const std::string &down,
                                          int64_t inner) const {
  std::vector<float> g = roundAll(matvec(x, gate, inner));
  std::vector<float> u = roundAll(matvec(x, up, inner));
  std::vector<float> a(inner);
  for (int64_t i = 0; i < inner; ++i)
    a[i] = roundBF16(swiglu(g[i], u[i], static_cast<float>(cfg.swigluAlpha),
                            static_cast<float>(cfg.swigluLimit)));
  return roundAll(matvec(a, down, cfg.hiddenSize));
}

std::vector<float> M3Reference::forward(Sequence &seq,
                                        const std::vector<int32_t> &tokens) {
  const ckpt::ModelConfig &c = cfg;
  const int64_t H = c.hiddenSize, Hq = c.numHeads, Hkv = c.numKVHeads,
                D = c.headDim, group = Hq / Hkv;
  const int64_t B = c.sparse.blockSize > 0 ? c.sparse.blockSize : 128;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> logits;
  selections.clear();
  margins.clear();
  followed = 0;

  cacheFollowing.clear();
  // Appends `dim` new values `own` of layer `l`'s cache `role` to `cache`
  // as stored in `format`: the followed implementation's entry for token
  // `t` (head `head` of its row) when it is admissible, else the
  // reference's own.
  auto store = [&](std::vector<float> &cache, const float *own, int64_t dim,
                   CacheFormat format, CacheRole role, int64_t l, size_t t,
                   int64_t head) {
    cache.insert(cache.end(), own, own + dim);
    float *stored = cache.data() + cache.size() - dim;
    static const std::map<int64_t, std::vector<std::vector<uint8_t>>> none;
    const auto &rows = !follow                     ? none
                       : role == CacheRole::Keys   ? follow->keyRows
                       : role == CacheRole::Values ? follow->valueRows
                                                   : follow->indexKeyRows;
    const int64_t bytes = cacheRowBytes(format, dim);
    auto it = rows.find(l);
    if (it == rows.end() || t >= it->second.size() ||
        int64_t(it->second[t].size()) < (head + 1) * bytes) {
      roundTripCache(stored, dim, format);
      return;
    }
    std::vector<float> theirs(dim);
    const CacheRowComparison c = compareCacheRow(
        format, own, it->second[t].data() + head * bytes, dim, theirs.data());
    CacheFollowing &stats = cacheFollowing[{role, l}];
    ++stats.rows;
    stats.followedRows += c.admissible;
    stats.values += dim;
    stats.differing += c.differing;
    if (c.admissible)
      std::copy(theirs.begin(), theirs.end(), stored);
    else
      roundTripCache(stored, dim, format);
  };

  for (size_t t = 0; t < tokens.size(); ++t) {
    const int64_t p = seq.length; // this token's position
    double margin = INFINITY;
    const std::vector<float> &embed = w("model.embed_tokens.weight");
    std::vector<float> x(embed.begin() + int64_t(tokens[t]) * H,
                         embed.begin() + (int64_t(tokens[t]) + 1) * H);
    for (int64_t l = 0; l < c.numLayers; ++l) {
      const std::string pre = "model.layers." + std::to_string(l) + ".";
      const ckpt::LayerSpec &layer = c.layers[l];
      std::vector<float> h = rmsNorm(x, pre + "input_layernorm.weight");
      std::vector<float> q =
          roundAll(matvec(h, pre + "self_attn.q_proj.weight", Hq * D));
      std::vector<float> k =
          roundAll(matvec(h, pre + "self_attn.k_proj.weight", Hkv * D));
      std::vector<float> v =
          roundAll(matvec(h, pre + "self_attn.v_proj.weight", Hkv * D));
      q = rmsNorm(q, pre + "self_attn.q_norm.weight");
      k = rmsNorm(k, pre + "self_attn.k_norm.weight");
      for (int64_t head = 0; head < Hq; ++head)
        rope(&q[head * D], p);
      for (int64_t head = 0; head < Hkv; ++head) {
        rope(&k[head * D], p);
        store(seq.keys[l * Hkv + head], &k[head * D], D, kvFormat,
              CacheRole::Keys, l, t, head);
        store(seq.values[l * Hkv + head], &v[head * D], D, kvFormat,
              CacheRole::Values, l, t, head);
      }

      std::vector<float> attn(Hq * D);
      if (layer.attention == ckpt::AttentionKind::Sparse) {
        const ckpt::SparseAttentionConfig &s = c.sparse;
        std::vector<float> iq =
            roundAll(matvec(h, pre + "self_attn.index_q_proj.weight",
                            s.indexHeads * s.indexDim));
        std::vector<float> ik = roundAll(
            matvec(h, pre + "self_attn.index_k_proj.weight", s.indexDim));
        iq = rmsNorm(iq, pre + "self_attn.index_q_norm.weight");
        ik = rmsNorm(ik, pre + "self_attn.index_k_norm.weight");
        for (int64_t head = 0; head < s.indexHeads; ++head)
          rope(&iq[head * s.indexDim], p);
        rope(ik.data(), p);
        // FP8 and NVFP4 index keys score against E4M3 queries (the Q8KV8 /
        // Q8KV4 indexers, msa-m3-spec.md §3.2, §5.4).
        if (indexFormat != CacheFormat::BF16)
          roundTripCache(iq.data(), iq.size(), CacheFormat::FP8);
        std::vector<float> &ic = seq.indexKeys[l];
        store(ic, ik.data(), s.indexDim, indexFormat, CacheRole::IndexKeys, l,
              t, 0);
        auto &perToken = selections[l];
        perToken.emplace_back();
        for (int64_t g = 0; g < Hkv; ++g) {
          std::vector<float> scores = blockScores(
              &iq[g * s.indexDim], ic.data(), p + 1, s.indexDim, p, B);
          std::vector<int32_t> blocks = selectBlocks(
              scores, p, s.topkBlocks, B, s.localBlocks, s.initBlocks);
          // Margin between the last ranked block and the best rejected one.
          const int64_t L = p / B;
          if (L + 1 > s.topkBlocks) {
            float lastChosen = scores[blocks[s.topkBlocks - s.localBlocks - 1]];
            float bestRejected = -INFINITY;
            for (int64_t b0 = s.initBlocks; b0 <= L - s.localBlocks; ++b0)
              if (std::find(blocks.begin(), blocks.end(), b0) == blocks.end())
                bestRejected = std::max(bestRejected, scores[b0]);
            const double own = (lastChosen - bestRejected) /
                               std::max(1.0f, std::fabs(lastChosen));
            margin = std::min<double>(margin, own);
            // A near tie: take the followed choice if admissible.
            if (follow && own < follow->bound) {
              auto it = follow->blocks.find(l);
              if (it != follow->blocks.end() && t < it->second.size() &&
                  g < int64_t(it->second[t].size()))
                followed +=
                    followBlocks(scores, p, B, lastChosen, follow->bound,
                                 it->second[t][g], blocks);
            }
          }
          perToken.back().push_back(blocks);
          for (int64_t head = g * group; head < (g + 1) * group; ++head)
            (q8Attention(l) ? attendQ8 : attend)(
                &q[head * D], seq.keys[l * Hkv + g].data(),
                seq.values[l * Hkv + g].data(), p + 1, D, p, scale, &blocks, B,
                &attn[head * D]);
        }
      } else {
        for (int64_t head = 0; head < Hq; ++head) {
          int64_t g = head / group;
          (q8Attention(l) ? attendQ8
                          : attend)(&q[head * D], seq.keys[l * Hkv + g].data(),
                                    seq.values[l * Hkv + g].data(), p + 1, D, p,
                                    scale, nullptr, B, &attn[head * D]);
        }
      }
      attn = roundAll(attn);
      std::vector<float> o =
          roundAll(matvec(attn, pre + "self_attn.o_proj.weight", H));
      std::vector<float> residual(H);
      for (int64_t i = 0; i < H; ++i)
        residual[i] = roundBF16(x[i] + o[i]);

      std::vector<float> h2 =
          rmsNorm(residual, pre + "post_attention_layernorm.weight");
      std::vector<float> ffn(H);
      if (layer.mlp == ckpt::MlpKind::Dense) {
        ffn = swigluMlp(h2, pre + "mlp.gate_proj.weight",
                        pre + "mlp.up_proj.weight",
                        pre + "mlp.down_proj.weight", c.denseIntermediateSize);
      } else {
        const std::string m = pre + "block_sparse_moe.";
        // Router (§1.4): FP32 logits, sigmoid, top-k on score + bias, the
        // unbiased scores renormalized and scaled.
        std::vector<float> logitsE =
            matvec(h2, m + "gate.weight", c.numExperts);
        std::vector<float> score(c.numExperts), biased(c.numExperts);
        for (int64_t e = 0; e < c.numExperts; ++e) {
          score[e] = 1.0f / (1.0f + std::exp(-logitsE[e]));
          biased[e] =
              score[e] +
              (c.routingBias ? w(m + "e_score_correction_bias")[e] : 0.0f);
        }
        std::vector<int64_t> order(c.numExperts);
        std::iota(order.begin(), order.end(), 0);
        // Biased score descending; the lower expert id wins a tie.
        std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return biased[a] != biased[b] ? biased[a] > biased[b] : a < b;
        });
        if (c.numExperts > c.expertsPerToken) {
          const double own = biased[order[c.expertsPerToken - 1]] -
                             biased[order[c.expertsPerToken]];
          margin = std::min<double>(margin, own);
          // A near tie: take the followed experts if admissible.
          const std::vector<std::vector<int32_t>> *others = nullptr;
          if (follow && own < follow->bound)
            if (auto it = follow->experts.find(l); it != follow->experts.end())
              others = &it->second;
          if (others && t < others->size())
            followed += followExperts(biased, c.expertsPerToken, follow->bound,
                                      (*others)[t], order);
        }
        float total = 0;
        for (int64_t i = 0; i < c.expertsPerToken; ++i)
          total += score[order[i]];
        std::vector<float> routed(H, 0.0f);
        for (int64_t i = 0; i < c.expertsPerToken; ++i) {
          int64_t e = order[i];
          float weight = static_cast<float>(c.routedScalingFactor) *
                         (c.renormalize ? score[e] / total : score[e]);
          const std::string x0 = m + "experts." + std::to_string(e) + ".";
          std::vector<float> g =
              roundAll(matvec(h2, x0 + "w1.weight", c.moeIntermediateSize));
          std::vector<float> u =
              roundAll(matvec(h2, x0 + "w3.weight", c.moeIntermediateSize));
          std::vector<float> a(c.moeIntermediateSize);
          for (int64_t j = 0; j < c.moeIntermediateSize; ++j)
            a[j] =
                roundBF16(swiglu(g[j], u[j], static_cast<float>(c.swigluAlpha),
                                 static_cast<float>(c.swigluLimit)));
          std::vector<float> d = matvec(a, x0 + "w2.weight", H);
          for (int64_t j = 0; j < H; ++j)
            routed[j] += weight * d[j];
        }
        std::vector<float> shared(H, 0.0f);
        if (c.numSharedExperts > 0)
          shared = swigluMlp(h2, m + "shared_experts.gate_proj.weight",
                             m + "shared_experts.up_proj.weight",
                             m + "shared_experts.down_proj.weight",
                             c.sharedIntermediateSize);
        for (int64_t j = 0; j < H; ++j)
          ffn[j] = roundBF16(roundBF16(routed[j]) + shared[j]);
      }
      for (int64_t i = 0; i < H; ++i)
        x[i] = roundBF16(residual[i] + ffn[i]);
    }
    std::vector<float> normed = rmsNorm(x, "model.norm.weight");
    std::vector<float> row = matvec(normed, "lm_head.weight", c.vocabSize);
    logits.insert(logits.end(), row.begin(), row.end());
    margins.push_back(margin);
    ++seq.length;
  }
  return logits;
}
