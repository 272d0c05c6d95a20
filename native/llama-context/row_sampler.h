#pragma once

#include <napi.h>

/** sampleRow(row, temperature, topK, topP, minP, uniform): a sampled token's draw from its logits row (row_sampler.cc). */
Napi::Value SampleRow(const Napi::CallbackInfo& info);
