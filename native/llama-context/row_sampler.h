#pragma once

#include <napi.h>

#include <cstdint>

/** A sampled token's settings and its uniform number in [0, 1) from the request's seeded generator (server/sampling.ts SamplingParams). */
struct SamplingDraw {
  double temperature;
  int32_t topK;
  double topP;
  double minP;
  double uniform;
};

/** The first largest entry of a logits row (NaN never largest, as a scalar `>` loop from entry 0 finds it), compared in vector lanes. */
int32_t firstArgmax(const float* row, int32_t size);

/** The token sampleToken draws from a logits row, or -1 where the most likely token's logit is not finite. Safe on any one thread at a time per thread (its scratch is per thread). */
int32_t drawToken(const float* row, int32_t size, const SamplingDraw& draw);

/** sampleRow(row, temperature, topK, topP, minP, uniform): a sampled token's draw from its logits row (row_sampler.cc). */
Napi::Value SampleRow(const Napi::CallbackInfo& info);
