// The server's draw of a sampled token (server/sampling.ts says what it draws and why), done next
// to the row in native code: in a decode step straight from llama.cpp's logits (drawToken), or
// from a row JavaScript holds (sampleRow). The same algorithm as the JavaScript fallback
// (sampleTokenInJs) operation for operation — the same candidates in the same order, the same
// single-precision weights from the same exp (negativeExp, not the C library's), the same sums in
// the same order — so a seed gives the same tokens on either path; test/row-sampler.test.ts holds
// them equal. Every pass but the nucleus's histogram is a loop without branches over the row,
// which the compiler vectorizes; each is built once per instruction set (target_clones) and
// picked at load. Compiled with -ffp-contract=off: a fused multiply-add would round differently
// from JavaScript.
#include "row_sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#define VECTORIZED __attribute__((target_clones("avx512f", "avx2", "default")))
#else
// Elsewhere the compiler's own vector width for the target (NEON on aarch64).
#define VECTORIZED
#endif

namespace {

/** At most this many slices of the candidates' value range (server/sampling.ts NUCLEUS_SLICES). */
constexpr int32_t kNucleusSlices = 4096;
/** Below this exponent a weight would come near the smallest normal float: no candidate (server/sampling.ts LOWEST_EXPONENT). */
constexpr float kLowestExponent = -86.0f;
/** Lanes of the weight sums (server/sampling.ts SUM_LANES). */
constexpr int32_t kSumLanes = 8;
/** Candidates per block of the draw's walk (server/sampling.ts WALK_BLOCK). */
constexpr int32_t kWalkBlock = 64;
/** Interleaved histograms of the nucleus's slice mass (server/sampling.ts HISTOGRAMS). */
constexpr int32_t kHistograms = 4;

/** e^x for x in [kLowestExponent, 0] in single precision, within 3e-7 relative (server/sampling.ts negativeExp: the same steps). */
inline float negativeExp(float x) {
  // Each constant is a double rounded once to single precision, as Math.fround rounds it.
  const float kLog2E = static_cast<float>(1.4426950408889634);
  const float kLn2High = static_cast<float>(0.693359375);
  const float kLn2Low = static_cast<float>(-2.12194440e-4);
  // Adding 1.5 * 2^23 rounds x / ln 2 to the nearest integer k and leaves k in the low bits.
  const float kRound = 12582912.0f;
  const float shifted = x * kLog2E + kRound;
  const float k = shifted - kRound;
  const float r = (x - k * kLn2High) - k * kLn2Low;
  float p = static_cast<float>(1.0 / 5040);
  p = p * r + static_cast<float>(1.0 / 720);
  p = p * r + static_cast<float>(1.0 / 120);
  p = p * r + static_cast<float>(1.0 / 24);
  p = p * r + static_cast<float>(1.0 / 6);
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  uint32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  const uint32_t scaleBits = (bits - 0x4B400000u + 127u) << 23;
  float scale;
  std::memcpy(&scale, &scaleBits, sizeof scale);
  return p * scale;
}

/** The largest non-NaN entry (-inf where there is none), in lanes a vector unit compares at once. */
VECTORIZED float largest(const float* row, int32_t size) {
  float lanes[16];
  std::fill(lanes, lanes + 16, -INFINITY);
  const int32_t whole = size - size % 16;
  for (int32_t i = 0; i < whole; i += 16) {
    for (int32_t lane = 0; lane < 16; lane++) lanes[lane] = row[i + lane] > lanes[lane] ? row[i + lane] : lanes[lane];
  }
  for (int32_t i = whole; i < size; i++) lanes[0] = row[i] > lanes[0] ? row[i] : lanes[0];
  float best = lanes[0];
  for (int32_t lane = 1; lane < 16; lane++) best = lanes[lane] > best ? lanes[lane] : best;
  return best;
}

/** weights[i] = e^((values[i] - top) / T) in single precision where that is a candidate (exponent not under kLowestExponent, weight at least minP), else 0. */
VECTORIZED void weightsOf(const float* values, int32_t count, float top, float inverseTemperature, double minP, float* weights) {
  for (int32_t i = 0; i < count; i++) {
    const float exponent = (values[i] - top) * inverseTemperature;
    const bool inRange = exponent >= kLowestExponent;
    const float weight = negativeExp(inRange ? exponent : 0.0f);
    weights[i] = inRange && static_cast<double>(weight) >= minP ? weight : 0.0f;
  }
}

/** The weights' sum in double precision: kSumLanes interleaved lanes added in a fixed tree. */
VECTORIZED double sumOf(const float* weights, int32_t count) {
  double lanes[kSumLanes] = {};
  const int32_t whole = count - count % kSumLanes;
  for (int32_t i = 0; i < whole; i += kSumLanes) {
    for (int32_t lane = 0; lane < kSumLanes; lane++) lanes[lane] += static_cast<double>(weights[i + lane]);
  }
  for (int32_t i = whole; i < count; i++) lanes[i - whole] += static_cast<double>(weights[i]);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

/** Each slice's weight, summed in kHistograms interleaved histograms (one candidate's add need not wait for the one before it), then added pairwise: mass[s]. */
void sliceMass(const float* weights, const int32_t* slices, int32_t count, int32_t sliceCount, std::vector<double>& mass) {
  const size_t stride = static_cast<size_t>(sliceCount) + 1;
  std::vector<double> partial(stride * kHistograms, 0.0);
  for (int32_t i = 0; i < count; i++) partial[(i % kHistograms) * stride + static_cast<size_t>(slices[i])] += weights[i];
  mass.assign(stride, 0.0);
  for (size_t s = 0; s < stride; s++) mass[s] = (partial[s] + partial[stride + s]) + (partial[2 * stride + s] + partial[3 * stride + s]);
}

/** The candidates in slice `slice`, in id order (blocks of kWalkBlock that hold none are passed over a vector at a time). */
VECTORIZED void inSlice(const int32_t* slices, int32_t count, int32_t slice, std::vector<int32_t>& found) {
  int32_t start = 0;
  for (; start + kWalkBlock <= count; start += kWalkBlock) {
    int32_t held = 0;
    for (int32_t i = 0; i < kWalkBlock; i++) held += slices[start + i] == slice ? 1 : 0;
    if (held == 0) continue;
    for (int32_t i = start; i < start + kWalkBlock; i++) {
      if (slices[i] == slice) found.push_back(i);
    }
  }
  for (; start < count; start++) {
    if (slices[start] == slice) found.push_back(start);
  }
}

/** Each candidate's slice of the value range from `high` down (the last slice holding whatever lies lower) (count, past every slice, for a weight of 0): a slice's values all lie above the next slice's. */
VECTORIZED void slicesOf(const float* values, const float* weights, int32_t count, double high, double scale, int32_t sliceCount, int32_t* slices) {
  for (int32_t i = 0; i < count; i++) {
    // Never negative, so truncation is the floor; a non-candidate's value (NaN, -inf) is never converted.
    const double distance = weights[i] > 0 ? (high - static_cast<double>(values[i])) * scale : 0.0;
    const int32_t slice = static_cast<int32_t>(distance);
    slices[i] = weights[i] > 0 ? (slice < sliceCount - 1 ? slice : sliceCount - 1) : sliceCount;
  }
}

/**
 * The draw's walk over whole blocks: from the first candidate, skips each block of kWalkBlock whose
 * kept weight (slice below `below`; without slices, every weight; kSumLanes lanes added in a fixed
 * tree) the draw lies past, taking it off `remaining`; returns where the walk goes on one by one.
 */
VECTORIZED int32_t skipBlocks(const float* weights, const int32_t* slices, int32_t below, int32_t count, double& remaining) {
  int32_t start = 0;
  for (; start + kWalkBlock <= count; start += kWalkBlock) {
    double lanes[kSumLanes] = {};
    for (int32_t i = 0; i < kWalkBlock; i += kSumLanes) {
      for (int32_t lane = 0; lane < kSumLanes; lane++) {
        const int32_t at = start + i + lane;
        lanes[lane] += slices == nullptr || slices[at] < below ? static_cast<double>(weights[at]) : 0.0;
      }
    }
    const double block = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    if (!(remaining - block > 0)) break;
    remaining -= block;
  }
  return start;
}

/** The first entry equal to `value` (found a block of kWalkBlock at a time), or `size`. */
VECTORIZED int32_t firstEqual(const float* row, int32_t size, float value) {
  int32_t start = 0;
  for (; start + kWalkBlock <= size; start += kWalkBlock) {
    int32_t found = 0;
    for (int32_t i = 0; i < kWalkBlock; i++) found += row[start + i] == value ? 1 : 0;
    if (found > 0) break;
  }
  for (; start < size; start++) {
    if (row[start] == value) return start;
  }
  return size;
}

/** The first largest entry: llama.cpp's greedy pick (server/logits-row.ts rowArgmax), a NaN first entry kept as the scalar loop keeps it. */
int32_t argmax(const float* row, int32_t size) {
  if (row[0] != row[0]) return 0;
  const int32_t first = firstEqual(row, size, largest(row, size));
  return first < size ? first : 0;
}

int32_t argmax(const double* row, int32_t size) {
  int32_t best = 0;
  for (int32_t id = 1; id < size; id++) {
    if (row[id] > row[best]) best = id;
  }
  return best;
}

/** The k highest entries by falling value, lower id first on ties, NaN never ranked (server/logits-row.ts rankedIds). */
template <typename T>
std::vector<int32_t> rankedIds(const T* row, int32_t size, int32_t k) {
  auto better = [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
  std::vector<int32_t> heap;
  const int32_t capacity = std::min(std::max(k, 0), size);
  heap.reserve(static_cast<size_t>(capacity));
  if (capacity == 0) return heap;
  // A heap under "better" keeps its worst entry at the front.
  for (int32_t id = 0; id < size; id++) {
    if (row[id] != row[id]) continue;
    if (static_cast<int32_t>(heap.size()) < capacity) {
      heap.push_back(id);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (row[id] > row[heap.front()]) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = id;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  return heap;
}

/** Reused by every draw on its thread (the main one, or a decode step's worker): a vocabulary-sized allocation per token would be most of the work. */
struct Scratch {
  std::vector<float> values;
  std::vector<float> weights;
  std::vector<int32_t> slices;
};
thread_local Scratch scratch;

/**
 * The top-p nucleus (server/sampling.ts nucleus): leaves each candidate's slice in `slices`, those
 * kept from the boundary slice moved one above it; returns the first slice not kept and the kept
 * candidates' weight.
 */
std::pair<int32_t, double> nucleus(const float* values, const float* weights, int32_t* slices, const int32_t* ids, int32_t count, double topP, double total, double low, double high) {
  const double target = topP * total;
  const int32_t sliceCount = std::min(kNucleusSlices, count);
  const double scale = high > low ? (sliceCount - 1) / (high - low) : 0;
  slicesOf(values, weights, count, high, scale, sliceCount, slices);
  std::vector<double> mass;
  sliceMass(weights, slices, count, sliceCount, mass);
  double above = 0;
  int32_t boundary = 0;
  while (boundary < sliceCount - 1 && above + mass[boundary] < target) above += mass[boundary++];
  const auto idOf = [ids](int32_t i) { return ids == nullptr ? i : ids[i]; };
  std::vector<int32_t> ranked;
  inSlice(slices, count, boundary, ranked);
  std::sort(ranked.begin(), ranked.end(), [values, idOf](int32_t a, int32_t b) { return values[a] > values[b] || (values[a] == values[b] && idOf(a) < idOf(b)); });
  for (const int32_t i : ranked) {
    if (above >= target) break;
    slices[i] = boundary - 1;
    above += weights[i];
  }
  return {boundary, above};
}

/** The candidates' values as floats: a float row where it lies, else gathered (top_k's order) or rounded into the scratch. */
const float* candidateValues(const float* row, const int32_t* ids, int32_t count) {
  if (ids == nullptr) return row;
  for (int32_t i = 0; i < count; i++) scratch.values[i] = row[ids[i]];
  return scratch.values.data();
}

const float* candidateValues(const double* row, const int32_t* ids, int32_t count) {
  for (int32_t i = 0; i < count; i++) scratch.values[i] = static_cast<float>(row[ids == nullptr ? i : ids[i]]);
  return scratch.values.data();
}

/** The token drawn, or -1 where the most likely token's logit is not finite. */
template <typename T>
int32_t draw(const T* row, int32_t size, const SamplingDraw& params) {
  const int32_t best = argmax(row, size);
  if (params.temperature == 0) return best;
  const float top = static_cast<float>(row[best]);
  if (!(top > -INFINITY && top < INFINITY)) return -1;
  // The candidates in order: top_k's k by falling value, else every token in id order.
  std::vector<int32_t> order;
  if (params.topK > 0) order = rankedIds(row, size, params.topK);
  const int32_t* ids = params.topK > 0 ? order.data() : nullptr;
  const int32_t count = params.topK > 0 ? static_cast<int32_t>(order.size()) : size;
  if (static_cast<int32_t>(scratch.weights.size()) < count) {
    scratch.values.resize(static_cast<size_t>(count));
    scratch.weights.resize(static_cast<size_t>(count));
    scratch.slices.resize(static_cast<size_t>(count));
  }
  const float* values = candidateValues(row, ids, count);
  float* weights = scratch.weights.data();
  int32_t* slices = scratch.slices.data();
  const float inverseTemperature = static_cast<float>(std::min(1 / params.temperature, static_cast<double>(FLT_MAX)));
  weightsOf(values, count, top, inverseTemperature, params.minP, weights);
  const double total = sumOf(weights, count);
  // Kept: a positive weight, and with a top-p cut a slice below the cut's.
  const bool cut = params.topP < 1;
  int32_t below = 0;
  double mass = total;
  // The slices span the values a weight can have: down to the exponent's lowest (a bound, not the lowest candidate, which would cost a pass).
  if (cut) std::tie(below, mass) = nucleus(values, weights, slices, ids, count, params.topP, total, top + kLowestExponent / static_cast<double>(inverseTemperature), top);
  const auto kept = [&](int32_t i) { return cut ? slices[i] < below : weights[i] > 0; };
  // The walk: whole blocks skipped while the draw lies past them, then candidate by candidate.
  double remaining = params.uniform * mass;
  for (int32_t i = skipBlocks(weights, cut ? slices : nullptr, below, count, remaining); i < count; i++) {
    if (!kept(i)) continue;
    remaining -= weights[i];
    if (remaining <= 0) return ids == nullptr ? i : ids[i];
  }
  // Rounding left a sliver: the last kept candidate.
  for (int32_t j = count - 1; j >= 0; j--) {
    if (kept(j)) return ids == nullptr ? j : ids[j];
  }
  return best;
}

}  // namespace

int32_t firstArgmax(const float* row, int32_t size) {
  return argmax(row, size);
}

int32_t drawToken(const float* row, int32_t size, const SamplingDraw& params) {
  return draw(row, size, params);
}

/**
 * sampleRow(row, temperature, topK, topP, minP, uniform) -> token id: the draw sampleToken makes from
 * a Float32Array or Float64Array row, `uniform` being the request's next number in [0, 1) from its
 * seeded generator. On the calling thread.
 */
Napi::Value SampleRow(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "sampleRow(row: Float32Array | Float64Array, temperature, topK, topP, minP, uniform)";
  if (info.Length() < 6 || !info[0].IsTypedArray()) {
    Napi::TypeError::New(env, usage).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  for (size_t i = 1; i < 6; i++) {
    if (!info[i].IsNumber()) {
      Napi::TypeError::New(env, usage).ThrowAsJavaScriptException();
      return env.Undefined();
    }
  }
  const SamplingDraw params{info[1].As<Napi::Number>().DoubleValue(), info[2].As<Napi::Number>().Int32Value(), info[3].As<Napi::Number>().DoubleValue(),
                            info[4].As<Napi::Number>().DoubleValue(), info[5].As<Napi::Number>().DoubleValue()};
  const auto typed = info[0].As<Napi::TypedArray>();
  const int32_t size = static_cast<int32_t>(typed.ElementLength());
  if (size == 0) {
    Napi::RangeError::New(env, "sampleRow: the row is empty").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int32_t id;
  if (typed.TypedArrayType() == napi_float32_array) {
    id = draw(info[0].As<Napi::Float32Array>().Data(), size, params);
  } else if (typed.TypedArrayType() == napi_float64_array) {
    id = draw(info[0].As<Napi::Float64Array>().Data(), size, params);
  } else {
    Napi::TypeError::New(env, usage).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (id < 0) {
    Napi::RangeError::New(env, "sampleRow: the distribution's most likely token has a logit that is not finite").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::Number::New(env, id);
}
