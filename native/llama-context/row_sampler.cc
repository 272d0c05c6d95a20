// sampleRow: the server's draw of a sampled token (server/sampling.ts says what it draws and why),
// done next to the row in native code. The same algorithm as the JavaScript fallback
// (sampleTokenInJs) operation for operation — the same candidates in the same order, the same
// double-precision weights from the same exp (negativeExp, not the C library's), the same sums in
// the same order — so a seed gives the same tokens on either path; test/row-sampler.test.ts holds
// them equal. Every step but the nucleus's boundary is a loop without branches over the row, which
// the compiler vectorizes; built once per instruction set (target_clones) and picked at load.
// Compiled with -ffp-contract=off: a fused multiply-add would round differently from JavaScript.
#include "row_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

/** At most this many slices of the candidates' value range (server/sampling.ts NUCLEUS_SLICES). */
constexpr int32_t kNucleusSlices = 4096;
/** Below this exponent a weight would be under the smallest normal double: no candidate (server/sampling.ts LOWEST_EXPONENT). */
constexpr double kLowestExponent = -708;
/** Lanes of the candidates' weight sum (server/sampling.ts SUM_LANES). */
constexpr int32_t kSumLanes = 8;

/** e^x for x in [kLowestExponent, 0], within 4e-16 relative (server/sampling.ts negativeExp: the same steps). */
inline double negativeExp(double x) {
  constexpr double kInvLn2 = 1.4426950408889634;
  constexpr double kLn2High = 6.93147180369123816490e-01;
  constexpr double kLn2Low = 1.90821492927058770002e-10;
  // Adding 1.5 * 2^52 rounds x / ln 2 to the nearest integer k and leaves k in the low bits.
  constexpr double kRound = 6755399441055744.0;
  const double shifted = x * kInvLn2 + kRound;
  const double k = shifted - kRound;
  const double r = (x - k * kLn2High) - k * kLn2Low;
  double p = 1.0 / 479001600;
  p = p * r + 1.0 / 39916800;
  p = p * r + 1.0 / 3628800;
  p = p * r + 1.0 / 362880;
  p = p * r + 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  uint64_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  const uint64_t scaleBits = (bits - 0x4338000000000000ULL + 1023) << 52;
  double scale;
  std::memcpy(&scale, &scaleBits, sizeof scale);
  return p * scale;
}

struct Weighed {
  double total;
  /** The lowest value among the candidates. */
  double low;
};

/**
 * weights[i] = e^((values[i] - top) / T) where that is a candidate (exponent not under
 * kLowestExponent, weight at least minP), else 0; their sum in kSumLanes lanes added in a fixed
 * tree, and the lowest candidate value.
 */
__attribute__((target_clones("avx512f", "avx2", "default"))) Weighed weigh(const double* values, int32_t count, double top, double inverseTemperature,
                                                                             double minP, double* weights) {
  for (int32_t i = 0; i < count; i++) {
    const double exponent = (values[i] - top) * inverseTemperature;
    const bool inRange = exponent >= kLowestExponent;
    const double weight = negativeExp(inRange ? exponent : 0);
    weights[i] = inRange && weight >= minP ? weight : 0;
  }
  double lanes[kSumLanes] = {};
  double lows[kSumLanes];
  std::fill(lows, lows + kSumLanes, top);
  const int32_t whole = count - count % kSumLanes;
  for (int32_t i = 0; i < whole; i += kSumLanes) {
    for (int32_t lane = 0; lane < kSumLanes; lane++) {
      const double weight = weights[i + lane];
      lanes[lane] += weight;
      lows[lane] = weight > 0 && values[i + lane] < lows[lane] ? values[i + lane] : lows[lane];
    }
  }
  for (int32_t i = whole; i < count; i++) {
    lanes[i - whole] += weights[i];
    if (weights[i] > 0 && values[i] < lows[i - whole]) lows[i - whole] = values[i];
  }
  const double total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  return {total, *std::min_element(lows, lows + kSumLanes)};
}

template <typename T>
int32_t argmax(const T* row, int32_t size) {
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

/** Reused by every draw (one at a time, on the main thread): a vocabulary-sized allocation per token would be most of the work. */
struct Scratch {
  std::vector<double> values;
  std::vector<double> weights;
  std::vector<int32_t> slices;
} scratch;

/**
 * The top-p nucleus (server/sampling.ts nucleus): leaves each candidate's slice in scratch.slices
 * (count, past every slice, for a non-candidate), those kept from the boundary slice moved one
 * above it; returns the first slice not kept and the kept candidates' weight.
 */
std::pair<int32_t, double> nucleus(const int32_t* ids, int32_t count, double topP, double total, double low, double high) {
  const double* values = scratch.values.data();
  const double* weights = scratch.weights.data();
  int32_t* slices = scratch.slices.data();
  const double target = topP * total;
  const int32_t sliceCount = std::min(kNucleusSlices, count);
  const double scale = high > low ? (sliceCount - 1) / (high - low) : 0;
  std::vector<double> mass(static_cast<size_t>(sliceCount), 0.0);
  for (int32_t i = 0; i < count; i++) {
    // Never negative, so truncation is the floor.
    slices[i] = weights[i] > 0 ? static_cast<int32_t>((high - values[i]) * scale) : sliceCount;
    if (weights[i] > 0) mass[slices[i]] += weights[i];
  }
  double above = 0;
  int32_t boundary = 0;
  while (boundary < sliceCount - 1 && above + mass[boundary] < target) above += mass[boundary++];
  const auto idOf = [ids](int32_t i) { return ids == nullptr ? i : ids[i]; };
  std::vector<int32_t> ranked;
  for (int32_t i = 0; i < count; i++) {
    if (slices[i] == boundary) ranked.push_back(i);
  }
  std::sort(ranked.begin(), ranked.end(), [values, idOf](int32_t a, int32_t b) { return values[a] > values[b] || (values[a] == values[b] && idOf(a) < idOf(b)); });
  for (const int32_t i : ranked) {
    if (above >= target) break;
    slices[i] = boundary - 1;
    above += weights[i];
  }
  return {boundary, above};
}

struct Params {
  double temperature;
  int32_t topK;
  double topP;
  double minP;
  double uniform;
};

/** The token drawn, or -1 where the most likely token's logit is not finite. */
template <typename T>
int32_t draw(const T* row, int32_t size, const Params& params) {
  const int32_t best = argmax(row, size);
  if (params.temperature == 0) return best;
  const double top = row[best];
  if (!(top > -INFINITY && top < INFINITY)) return -1;
  // The candidates in order: top_k's k by falling value, else every token in id order.
  std::vector<int32_t> order;
  if (params.topK > 0) order = rankedIds(row, size, params.topK);
  const int32_t* ids = params.topK > 0 ? order.data() : nullptr;
  const int32_t count = params.topK > 0 ? static_cast<int32_t>(order.size()) : size;
  if (static_cast<int32_t>(scratch.values.size()) < count) {
    scratch.values.resize(static_cast<size_t>(count));
    scratch.weights.resize(static_cast<size_t>(count));
    scratch.slices.resize(static_cast<size_t>(count));
  }
  double* values = scratch.values.data();
  for (int32_t i = 0; i < count; i++) values[i] = row[ids == nullptr ? i : ids[i]];
  const Weighed weighed = weigh(values, count, top, 1 / params.temperature, params.minP, scratch.weights.data());
  const double* weights = scratch.weights.data();
  const bool cut = params.topP < 1;
  const auto [below, mass] = cut ? nucleus(ids, count, params.topP, weighed.total, weighed.low, top) : std::pair<int32_t, double>{0, weighed.total};
  const int32_t* slices = scratch.slices.data();
  double remaining = params.uniform * mass;
  int32_t last = best;
  for (int32_t i = 0; i < count; i++) {
    if (!(weights[i] > 0) || (cut && slices[i] >= below)) continue;
    last = ids == nullptr ? i : ids[i];
    remaining -= weights[i];
    if (remaining <= 0) return last;
  }
  return last;
}

}  // namespace

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
  const Params params{info[1].As<Napi::Number>().DoubleValue(), info[2].As<Napi::Number>().Int32Value(), info[3].As<Napi::Number>().DoubleValue(),
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
