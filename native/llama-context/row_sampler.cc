// sampleRow: the server's draw of a sampled token (server/sampling.ts says what it draws and why),
// done next to the row in native code. The same algorithm as the JavaScript fallback
// (sampleTokenInJs) step for step — the same candidates in the same order, the same double-precision
// weights and sums — so a seed gives the same tokens on either path; test/row-sampler.test.ts holds
// them equal. In JavaScript the exp over every vocabulary entry and the nucleus's slicing cost
// 4-11 ms a token at 152k-262k entries, most of a sampled token on a real vocabulary.
#include "row_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

/** At most this many slices of the candidates' value range (server/sampling.ts NUCLEUS_SLICES). */
constexpr int32_t kNucleusSlices = 4096;

struct Params {
  double temperature;
  int32_t topK;
  double topP;
  double minP;
  double uniform;
};

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

struct Candidates {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  std::vector<int32_t> slices;
};

/** Reused by every draw (one at a time, on the main thread): a vocabulary-sized allocation per token would be most of the work. */
Candidates scratch;

/** The first slice not kept by top-p and the kept candidates' weight (server/sampling.ts nucleus). */
template <typename T>
std::pair<int32_t, double> nucleus(const T* row, int32_t count, double topP, double total, double low, double high) {
  const double target = topP * total;
  const int32_t sliceCount = std::min(kNucleusSlices, count);
  const double scale = high > low ? (sliceCount - 1) / (high - low) : 0;
  std::vector<double> mass(static_cast<size_t>(sliceCount), 0.0);
  for (int32_t i = 0; i < count; i++) {
    const int32_t slice = static_cast<int32_t>(std::floor((high - static_cast<double>(row[scratch.ids[i]])) * scale));
    scratch.slices[i] = slice;
    mass[slice] += scratch.weights[i];
  }
  double above = 0;
  int32_t boundary = 0;
  while (boundary < sliceCount - 1 && above + mass[boundary] < target) above += mass[boundary++];
  std::vector<int32_t> ranked;
  for (int32_t i = 0; i < count; i++) {
    if (scratch.slices[i] == boundary) ranked.push_back(i);
  }
  std::sort(ranked.begin(), ranked.end(), [row](int32_t a, int32_t b) {
    const double va = row[scratch.ids[a]], vb = row[scratch.ids[b]];
    return va > vb || (va == vb && scratch.ids[a] < scratch.ids[b]);
  });
  for (const int32_t i : ranked) {
    if (above >= target) break;
    scratch.slices[i] = boundary - 1;
    above += scratch.weights[i];
  }
  return {boundary, above};
}

/** The token drawn, or -1 where the most likely token's logit is not finite. */
template <typename T>
int32_t draw(const T* row, int32_t size, const Params& params) {
  const int32_t best = argmax(row, size);
  if (params.temperature == 0) return best;
  const double top = row[best];
  if (!(top > -INFINITY && top < INFINITY)) return -1;
  std::vector<int32_t> order;
  if (params.topK > 0) order = rankedIds(row, size, params.topK);
  const int32_t candidates = params.topK > 0 ? static_cast<int32_t>(order.size()) : size;
  if (static_cast<int32_t>(scratch.ids.size()) < candidates) {
    scratch.ids.resize(static_cast<size_t>(candidates));
    scratch.weights.resize(static_cast<size_t>(candidates));
    scratch.slices.resize(static_cast<size_t>(candidates));
  }
  int32_t count = 0;
  double total = 0;
  double low = top;
  for (int32_t i = 0; i < candidates; i++) {
    const int32_t id = params.topK > 0 ? order[static_cast<size_t>(i)] : i;
    const double value = row[id];
    const double exponent = (value - top) / params.temperature;
    if (!(exponent > -746)) continue;
    const double weight = std::exp(exponent);
    if (weight == 0 || weight < params.minP) continue;
    scratch.ids[count] = id;
    scratch.weights[count++] = weight;
    total += weight;
    if (value < low) low = value;
  }
  const bool cut = params.topP < 1;
  const auto [below, mass] = cut ? nucleus(row, count, params.topP, total, low, top) : std::pair<int32_t, double>{0, total};
  double remaining = params.uniform * mass;
  int32_t last = best;
  for (int32_t i = 0; i < count; i++) {
    if (cut && scratch.slices[i] >= below) continue;
    last = scratch.ids[i];
    remaining -= scratch.weights[i];
    if (remaining <= 0) return scratch.ids[i];
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
