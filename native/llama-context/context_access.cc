// Reaches the llama_context inside a node-llama-cpp context, for what node-llama-cpp 3.21.1 does
// not do (docs/findings.md):
//
// 1. A persistent ggml thread pool, as llama-server gives each of its contexts (common/common.cpp,
//    common_threadpools). Without one, ggml creates and joins n_threads - 1 threads for every graph
//    it computes. Where an idle vCPU halts until woken (Firecracker/KVM guests such as our CI
//    machines), the fresh thread waits milliseconds for its vCPU while the calling thread spins at
//    the first barrier: 12-17 ms per token at 2 threads against 0.5 ms with a pool.
// 2. Settling a batch's outputs before samplings start: llama.cpp reorders a batch's output rows in
//    place on the first logits read, and node-llama-cpp samples each sequence on its own libuv
//    thread, so two first reads at once can hand a sequence another's logits.
// 3. A greedy step without thread hops: node-llama-cpp's per-token path (a decode on one libuv
//    worker, a sampling on another, JavaScript in between) cost more than the graph itself on the
//    tiny fixtures; our server's greedy requests are decoded here, in one llama_decode per step,
//    and so are its speculative verifications (an output, an argmax, at every drafted position).
//    A long step (prompt tokens) can run on a worker thread instead, so that the event loop
//    reads requests and streams tokens while it computes.
// 4. What a prompt cache needs that node-llama-cpp does not expose: removing a sequence's cells
//    from a position on, the window's first position, copying a sequence, and saving/restoring a
//    sequence's state (the recurrent and sliding-window part alone: a context checkpoint, as
//    llama-server's tools/server makes them with LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY; or all of it,
//    for a prompt cache in host memory as llama-server's --cache-ram keeps one).
//
// The llama_context is private to node-llama-cpp's AddonContext; its class definition is read from
// the exact node-llama-cpp and llama.cpp sources installed (build-native.js extracts the headers),
// and the fields used are checked against what the caller says the context was created with
// before the pointer is dereferenced.
#include <dlfcn.h>
#include <sched.h>
#include <link.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <napi.h>

#include "row_sampler.h"

#include "AddonContext.h"
#include "AddonModel.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

namespace {

struct LlamaSymbols {
  decltype(&llama_attach_threadpool) attach = nullptr;
  decltype(&llama_n_ctx) nCtx = nullptr;
  decltype(&llama_n_seq_max) nSeqMax = nullptr;
  decltype(&llama_n_threads) nThreads = nullptr;
  decltype(&llama_n_batch) nBatch = nullptr;
  decltype(&llama_get_logits) getLogits = nullptr;
  decltype(&llama_get_logits_ith) getLogitsIth = nullptr;
  decltype(&llama_get_model) getModel = nullptr;
  decltype(&llama_model_get_vocab) modelVocab = nullptr;
  decltype(&llama_vocab_n_tokens) vocabSize = nullptr;
  decltype(&llama_token_to_piece) tokenToPiece = nullptr;
  decltype(&llama_batch_init) batchInit = nullptr;
  decltype(&llama_batch_free) batchFree = nullptr;
  decltype(&llama_decode) decode = nullptr;
  decltype(&llama_get_memory) memory = nullptr;
  decltype(&llama_memory_seq_rm) memorySeqRm = nullptr;
  decltype(&llama_memory_seq_cp) memorySeqCp = nullptr;
  decltype(&llama_memory_seq_pos_min) memorySeqPosMin = nullptr;
  decltype(&llama_model_is_recurrent) modelIsRecurrent = nullptr;
  decltype(&llama_model_is_hybrid) modelIsHybrid = nullptr;
  decltype(&llama_model_n_swa) modelSwa = nullptr;
  decltype(&llama_state_seq_get_size_ext) stateSize = nullptr;
  decltype(&llama_state_seq_get_data_ext) stateGet = nullptr;
  decltype(&llama_state_seq_set_data_ext) stateSet = nullptr;
  decltype(&ggml_threadpool_params_default) paramsDefault = nullptr;
  decltype(&ggml_threadpool_new) poolNew = nullptr;
  decltype(&ggml_threadpool_free) poolFree = nullptr;
};

/** node-llama-cpp's llama.cpp libraries loaded in this process (its addon loaded them). */
std::vector<std::string> loadedLlamaLibraries() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string path = info->dlpi_name == nullptr ? "" : info->dlpi_name;
        const std::string name = path.substr(path.find_last_of('/') + 1);
        if (path.find("node-llama-cpp") != std::string::npos && (name.rfind("libllama.", 0) == 0 || name.rfind("libggml", 0) == 0)) {
          static_cast<std::vector<std::string>*>(out)->push_back(path);
        }
        return 0;
      },
      &paths);
  return paths;
}

void* findSymbol(const std::vector<std::string>& libraries, const char* name) {
  for (const auto& path : libraries) {
    void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    void* symbol = dlsym(handle, name);
    dlclose(handle);  // RTLD_NOLOAD took a reference on a library that stays loaded by node-llama-cpp
    if (symbol != nullptr) return symbol;
  }
  return nullptr;
}

/** Resolves every function, or names the first one missing. */
std::string resolve(LlamaSymbols& out) {
  const auto libraries = loadedLlamaLibraries();
  if (libraries.empty()) return "node-llama-cpp's llama.cpp libraries are not loaded in this process";
  const auto take = [&](auto& slot, const char* name) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(findSymbol(libraries, name));
    return slot != nullptr;
  };
  if (!take(out.attach, "llama_attach_threadpool")) return "llama_attach_threadpool not found";
  if (!take(out.nCtx, "llama_n_ctx")) return "llama_n_ctx not found";
  if (!take(out.nSeqMax, "llama_n_seq_max")) return "llama_n_seq_max not found";
  if (!take(out.nThreads, "llama_n_threads")) return "llama_n_threads not found";
  if (!take(out.nBatch, "llama_n_batch")) return "llama_n_batch not found";
  if (!take(out.getLogits, "llama_get_logits")) return "llama_get_logits not found";
  if (!take(out.getLogitsIth, "llama_get_logits_ith")) return "llama_get_logits_ith not found";
  if (!take(out.batchInit, "llama_batch_init") || !take(out.batchFree, "llama_batch_free") || !take(out.decode, "llama_decode")) return "llama.cpp's batch functions not found";
  if (!take(out.memory, "llama_get_memory") || !take(out.memorySeqRm, "llama_memory_seq_rm")) return "llama.cpp's memory functions not found";
  if (!take(out.memorySeqCp, "llama_memory_seq_cp") || !take(out.memorySeqPosMin, "llama_memory_seq_pos_min")) return "llama.cpp's memory functions not found";
  if (!take(out.modelIsRecurrent, "llama_model_is_recurrent") || !take(out.modelIsHybrid, "llama_model_is_hybrid") || !take(out.modelSwa, "llama_model_n_swa")) return "llama.cpp's model kind functions not found";
  if (!take(out.stateSize, "llama_state_seq_get_size_ext") || !take(out.stateGet, "llama_state_seq_get_data_ext") || !take(out.stateSet, "llama_state_seq_set_data_ext")) return "llama.cpp's sequence state functions not found";
  if (!take(out.getModel, "llama_get_model") || !take(out.modelVocab, "llama_model_get_vocab") || !take(out.vocabSize, "llama_vocab_n_tokens") || !take(out.tokenToPiece, "llama_token_to_piece")) {
    return "llama.cpp's vocabulary functions not found";
  }
  if (!take(out.paramsDefault, "ggml_threadpool_params_default")) return "ggml_threadpool_params_default not found";
  decltype(&ggml_backend_dev_by_type) devByType = nullptr;
  decltype(&ggml_backend_dev_backend_reg) devReg = nullptr;
  decltype(&ggml_backend_reg_get_proc_address) procAddress = nullptr;
  if (!take(devByType, "ggml_backend_dev_by_type") || !take(devReg, "ggml_backend_dev_backend_reg") || !take(procAddress, "ggml_backend_reg_get_proc_address")) {
    return "ggml's backend registry functions not found";
  }
  // The CPU backend is one of several variant libraries chosen at load time: ask the registry, as llama.cpp does.
  ggml_backend_dev_t cpu = devByType(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (cpu == nullptr) return "no CPU backend is registered";
  ggml_backend_reg_t reg = devReg(cpu);
  out.poolNew = reinterpret_cast<decltype(out.poolNew)>(procAddress(reg, "ggml_threadpool_new"));
  out.poolFree = reinterpret_cast<decltype(out.poolFree)>(procAddress(reg, "ggml_threadpool_free"));
  if (out.poolNew == nullptr || out.poolFree == nullptr) return "the CPU backend has no ggml_threadpool_new";
  return "";
}

LlamaSymbols symbols;

/** Resolves the symbols once; false (with a JavaScript error thrown) where one is missing. */
bool symbolsResolved(Napi::Env env) {
  static const std::string unresolved = resolve(symbols);
  if (unresolved.empty()) return true;
  Napi::Error::New(env, unresolved).ThrowAsJavaScriptException();
  return false;
}

/** A node-llama-cpp context we reached, and the pool we gave it (if any). */
struct Handle {
  llama_context* ctx;
  ggml_threadpool* pool;
  /** A batch of the context's batch size, allocated on first use. */
  llama_batch batch;
  bool hasBatch;
  /** A decodeGreedy runs on a worker thread: nothing else may touch the context until it settles. */
  bool busy;
  /** The last step's kept logits rows (topK -1), a vocabulary each, back to back: what stepRow copies out. */
  std::vector<float> stepRows;
  /** Per entry of the last step, its row in stepRows, or -1 where it kept none. */
  std::vector<int32_t> stepRowOf;
};
std::map<uint32_t, Handle> handles;
uint32_t nextHandle = 1;

uint32_t expectUint(const Napi::Object& expected, const char* key) {
  return expected.Get(key).As<Napi::Number>().Uint32Value();
}

Handle* handleAt(const Napi::CallbackInfo& info) {
  const auto found = info.Length() > 0 && info[0].IsNumber() ? handles.find(info[0].As<Napi::Number>().Uint32Value()) : handles.end();
  if (found == handles.end()) {
    Napi::Error::New(info.Env(), "no such context handle").ThrowAsJavaScriptException();
    return nullptr;
  }
  if (found->second.busy) {
    Napi::Error::New(info.Env(), "a decodeGreedy step is still running on this context: await it first").ThrowAsJavaScriptException();
    return nullptr;
  }
  return &found->second;
}

/** The first largest logit of a batch output (llama.cpp's greedy sampler's pick), or -1 without logits. */
int32_t argmaxRow(llama_context* ctx, int32_t batchIndex) {
  const float* logits = symbols.getLogitsIth(ctx, batchIndex);
  if (logits == nullptr) return -1;
  return firstArgmax(logits, symbols.vocabSize(symbols.modelVocab(symbols.getModel(ctx))));
}

/**
 * The k most likely tokens of a batch output and their log-probabilities, a log-softmax over the
 * whole vocabulary in double precision (the field's definition of a gap, docs/metrics.md); ties go to the lower id. `order`
 * is scratch the caller keeps between rows, so a 152k vocabulary is not reallocated per position.
 */
bool topKRow(llama_context* ctx, int32_t batchIndex, int32_t k, std::vector<int32_t>& order, int32_t* ids, double* logprobs, int32_t given, double* givenLogprob) {
  const float* logits = symbols.getLogitsIth(ctx, batchIndex);
  if (logits == nullptr) return false;
  const int32_t vocab = symbols.vocabSize(symbols.modelVocab(symbols.getModel(ctx)));
  double max = -INFINITY;
  for (int32_t id = 0; id < vocab; id++) max = std::max(max, static_cast<double>(logits[id]));
  double sum = 0;
  for (int32_t id = 0; id < vocab; id++) sum += std::exp(static_cast<double>(logits[id]) - max);
  const double logSum = max + std::log(sum);
  order.resize(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [logits](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (int32_t i = 0; i < k; i++) {
    ids[i] = order[i];
    logprobs[i] = static_cast<double>(logits[order[i]]) - logSum;
  }
  *givenLogprob = given >= 0 && given < vocab ? static_cast<double>(logits[given]) - logSum : NAN;
  return true;
}

/**
 * open(nativeContext, expected: {contextSize (per sequence), sequences, batchSize, threads}) -> handle.
 * `nativeContext` is LlamaContext's `_ctx` (node-llama-cpp's wrapped AddonContext).
 */
Napi::Value Open(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsObject() || !info[1].IsObject()) {
    Napi::TypeError::New(env, "open(nativeContext, expected)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (!symbolsResolved(env)) return env.Undefined();
  void* wrapped = nullptr;
  if (napi_unwrap(env, info[0], &wrapped) != napi_ok || wrapped == nullptr) {
    Napi::Error::New(env, "the object is not a wrapped node-llama-cpp context").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto* addonContext = static_cast<AddonContext*>(wrapped);
  const auto expected = info[1].As<Napi::Object>();
  const uint32_t contextSize = expectUint(expected, "contextSize");
  const uint32_t sequences = expectUint(expected, "sequences");
  const uint32_t batchSize = expectUint(expected, "batchSize");
  const int32_t threads = static_cast<int32_t>(expectUint(expected, "threads"));
  const auto& params = addonContext->context_params;
  // The layout check: the parameters node-llama-cpp stored must be the ones it was given. Only
  // then is the context pointer next to them trusted and asked the same through llama.cpp's API.
  if (!addonContext->contextLoaded || addonContext->disposed || addonContext->ctx == nullptr || params.n_ctx < contextSize * sequences ||
      params.n_seq_max != sequences || params.n_batch != batchSize || params.n_threads != threads || params.n_threads_batch != threads) {
    Napi::Error::New(env, "node-llama-cpp's context does not look as expected (loaded, context size, sequences, batch size, threads); its layout may have changed")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  llama_context* ctx = addonContext->ctx;
  if (symbols.nCtx(ctx) != params.n_ctx || symbols.nSeqMax(ctx) != sequences || symbols.nThreads(ctx) != threads) {
    const std::string seen = "context size " + std::to_string(symbols.nCtx(ctx)) + ", sequences " + std::to_string(symbols.nSeqMax(ctx)) + ", threads " + std::to_string(symbols.nThreads(ctx));
    Napi::Error::New(env, "llama.cpp's context disagrees with node-llama-cpp's parameters: " + seen).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const uint32_t id = nextHandle++;
  handles[id] = Handle{ctx, nullptr, {}, false, false, {}, {}};
  return Napi::Number::New(env, id);
}

/** attachPool(handle, poll): a persistent pool with the context's thread count. */
Napi::Value AttachPool(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Handle* handle = handleAt(info);
  if (handle == nullptr) return env.Undefined();
  if (handle->pool != nullptr) return env.Undefined();
  ggml_threadpool_params poolParams = symbols.paramsDefault(symbols.nThreads(handle->ctx));
  poolParams.poll = info[1].As<Napi::Number>().Uint32Value();
  handle->pool = symbols.poolNew(&poolParams);
  if (handle->pool == nullptr) {
    Napi::Error::New(env, "ggml_threadpool_new failed").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  symbols.attach(handle->ctx, handle->pool, nullptr);
  return env.Undefined();
}

/**
 * yieldCpu(): gives the calling thread's core to whatever else is ready to run on it, if anything
 * (sched_yield). A token just written to a socket wakes its reader; when that reader is on this
 * machine, it waits for this core while the next step computes unless the step lets it run first.
 */
Napi::Value YieldCpu(const Napi::CallbackInfo& info) {
  sched_yield();
  return info.Env().Undefined();
}

/**
 * settleOutputs(handle): llama.cpp reorders a batch's output rows in place on the first logits
 * read after the batch. Doing that read here, on the calling thread, before samplings start on
 * other threads, leaves them only reading.
 */
Napi::Value SettleOutputs(const Napi::CallbackInfo& info) {
  Handle* handle = handleAt(info);
  if (handle != nullptr) symbols.getLogits(handle->ctx);
  return info.Env().Undefined();
}

/**
 * greedyToken(handle, batchLogitIndex) -> token id: the argmax of a batch output's logits, the first
 * of equal maxima as llama.cpp's greedy sampler picks it, on the calling thread — a vocabulary's
 * scan costs less than the hop to a worker thread and back that a sampling takes.
 */
Napi::Value GreedyToken(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Handle* handle = handleAt(info);
  if (handle == nullptr) return env.Undefined();
  const int32_t best = argmaxRow(handle->ctx, info[1].As<Napi::Number>().Int32Value());
  if (best < 0) {
    Napi::Error::New(env, "llama.cpp has no logits at that batch index").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::Number::New(env, best);
}

/** A vocabulary's logits as a Float32Array: into `into` where it is one that holds exactly the vocabulary, else a new one. */
Napi::Value copiedRow(const Napi::CallbackInfo& info, const Handle& handle, const float* logits) {
  const int32_t vocab = symbols.vocabSize(symbols.modelVocab(symbols.getModel(handle.ctx)));
  const bool reuse = info.Length() > 2 && info[2].IsTypedArray() && info[2].As<Napi::TypedArray>().TypedArrayType() == napi_float32_array &&
                     info[2].As<Napi::Float32Array>().ElementLength() == static_cast<size_t>(vocab);
  auto row = reuse ? info[2].As<Napi::Float32Array>() : Napi::Float32Array::New(info.Env(), static_cast<size_t>(vocab));
  std::memcpy(row.Data(), logits, sizeof(float) * static_cast<size_t>(vocab));
  return row;
}

/**
 * logitsRow(handle, batchLogitIndex[, into]) -> Float32Array: a copy of a batch output's logits, one
 * per vocabulary entry, on the calling thread — into `into` where it is given and holds exactly the
 * vocabulary (a row the caller is done with: a fresh 0.6-1 MB array per sampled token left the
 * garbage collector far behind), else into a new array. What the server samples from
 * (server/sampling.ts): one memcpy, where node-llama-cpp's probabilities cross as a JavaScript array
 * of 2 × the vocabulary's numbers revived into a Map (a third of a second per token at 262k entries).
 */
Napi::Value LogitsRow(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Handle* handle = handleAt(info);
  if (handle == nullptr) return env.Undefined();
  const float* logits = symbols.getLogitsIth(handle->ctx, info[1].As<Napi::Number>().Int32Value());
  if (logits == nullptr) {
    Napi::Error::New(env, "llama.cpp has no logits at that batch index").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return copiedRow(info, *handle, logits);
}

/**
 * stepRow(handle, entry[, into]) -> Float32Array: the logits row the last greedy step kept for entry
 * `entry` (its topK was -1: a sampled request's token), copied as logitsRow copies. Kept by the step
 * itself because one step may span several llama_decodes, each overwriting the last one's outputs.
 */
Napi::Value StepRow(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Handle* handle = handleAt(info);
  if (handle == nullptr) return env.Undefined();
  const int32_t entry = info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().Int32Value() : -1;
  const int32_t row = entry >= 0 && static_cast<size_t>(entry) < handle->stepRowOf.size() ? handle->stepRowOf[entry] : -1;
  if (row < 0) {
    Napi::RangeError::New(env, "stepRow(handle, entry): the last step kept no row for that entry (ask with topK -1)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const size_t vocab = static_cast<size_t>(symbols.vocabSize(symbols.modelVocab(symbols.getModel(handle->ctx))));
  return copiedRow(info, *handle, handle->stepRows.data() + static_cast<size_t>(row) * vocab);
}

/** One decode call's work (decodeGreedy, decodeGreedyOffThread, decodeVerify), copied out of JavaScript's arrays so that it can run off the main thread. */
struct DecodeStep {
  std::vector<int32_t> sequences;
  std::vector<int32_t> counts;
  std::vector<int32_t> tokens;
  std::vector<int32_t> starts;
  /** At most this many tokens per llama_decode. */
  int32_t capacity;
  /** Per sequence, how many of its most likely next tokens to report with their log-probs (0: none; kKeepRow: keep its whole logits row for stepRow; kDrawHere: draw its sampled token from the row here, by `draws`); empty: none for any. */
  std::vector<int32_t> topK;
  /** Per sequence, what a kDrawHere entry draws with (unread for the others). */
  std::vector<SamplingDraw> draws;
};

/** DecodeStep::topK's asks other than a count: keep the output's row for stepRow, or draw the sampled token from it in the step. */
constexpr int32_t kKeepRow = -1;
constexpr int32_t kDrawHere = -2;

/** What a greedy step gives: each sequence's argmax (its drawn token where it asked kDrawHere), and where asked (DecodeStep::topK) its top-k rows, flat in sequence order, and the argmax's own log-prob. */
struct GreedyOutputs {
  std::vector<int32_t> next;
  std::vector<int32_t> ids;
  std::vector<double> logprobs;
  std::vector<double> chosen;
  /** Why a draw failed ("" when none did). */
  std::string drawFailure;
};

/**
 * Puts a step's tokens through llama_decode, at most `capacity` tokens per call: sequence e's
 * tokens at positions starts[e] onwards. A token gets an output where `wantsOutput(e, t)` says so,
 * and `onOutput(e, flatIndex, batchIndex)` reads it before the next call overwrites it. Touches no
 * JavaScript value (it may run on a libuv worker thread). "" or why it failed.
 */
template <typename WantsOutput, typename OnOutput>
std::string decodeInBatches(Handle& handle, const DecodeStep& step, WantsOutput wantsOutput, OnOutput onOutput) {
  llama_batch& batch = handle.batch;
  struct Output { size_t entry; size_t flat; int32_t index; };
  std::vector<Output> outputs;  // of the chunk being filled
  const auto flush = [&]() -> std::string {
    if (batch.n_tokens == 0) return "";
    const int32_t status = symbols.decode(handle.ctx, batch);
    if (status != 0) return "llama_decode returned " + std::to_string(status);
    for (const Output& o : outputs) {
      if (!onOutput(o.entry, o.flat, o.index)) return "llama.cpp has no logits for a decoded token";
    }
    batch.n_tokens = 0;
    outputs.clear();
    return "";
  };
  batch.n_tokens = 0;
  size_t offset = 0;
  for (size_t e = 0; e < step.sequences.size(); e++) {
    for (int32_t t = 0; t < step.counts[e]; t++, offset++) {
      const int32_t i = batch.n_tokens++;
      batch.token[i] = step.tokens[offset];
      batch.pos[i] = step.starts[e] + t;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = step.sequences[e];
      batch.logits[i] = wantsOutput(e, t);
      if (batch.logits[i]) outputs.push_back({e, offset, i});
      if (batch.n_tokens == step.capacity) {
        const std::string failed = flush();
        if (!failed.empty()) return failed;
      }
    }
  }
  return flush();
}

/**
 * Runs a greedy step's llama_decodes (only each entry's last token with an output) and puts each
 * entry's argmax in `out.next`, and where the step asks its top-k (topKRow: the same tie rule as the
 * argmax, lower id first); returns why it failed, or "".
 */
std::string runGreedyStep(Handle& handle, const DecodeStep& step, GreedyOutputs& out) {
  const size_t entries = step.sequences.size();
  const size_t vocab = static_cast<size_t>(symbols.vocabSize(symbols.modelVocab(symbols.getModel(handle.ctx))));
  out.next.assign(entries, -1);
  std::vector<size_t> rowAt(entries, 0);
  size_t rows = 0;
  handle.stepRowOf.assign(entries, -1);
  int32_t kept = 0;
  for (size_t e = 0; e < step.topK.size(); e++) {
    rowAt[e] = rows;
    rows += static_cast<size_t>(std::max(step.topK[e], 0));
    if (step.topK[e] == kKeepRow) handle.stepRowOf[e] = kept++;
  }
  handle.stepRows.resize(static_cast<size_t>(kept) * vocab);
  out.ids.assign(rows, -1);
  out.logprobs.assign(rows, NAN);
  out.chosen.assign(step.topK.empty() ? 0 : entries, NAN);
  std::vector<int32_t> order;
  const std::string failed = decodeInBatches(handle, step, [&](size_t e, int32_t t) { return t == step.counts[e] - 1; }, [&](size_t e, size_t, int32_t index) {
    const int32_t k = step.topK.empty() ? 0 : step.topK[e];
    if (k == kDrawHere) {
      // Straight from llama.cpp's row, on whichever thread runs the step: no copy, no hop to JavaScript.
      const float* logits = symbols.getLogitsIth(handle.ctx, index);
      if (logits == nullptr) return false;
      out.next[e] = drawToken(logits, static_cast<int32_t>(vocab), step.draws[e]);
      if (out.next[e] < 0) out.drawFailure = "the distribution's most likely token has a logit that is not finite";
      return out.next[e] >= 0;
    }
    out.next[e] = argmaxRow(handle.ctx, index);
    if (out.next[e] < 0) return false;
    if (k == kKeepRow) {
      std::memcpy(handle.stepRows.data() + static_cast<size_t>(handle.stepRowOf[e]) * vocab, symbols.getLogitsIth(handle.ctx, index), sizeof(float) * vocab);
      return true;
    }
    return k == 0 || topKRow(handle.ctx, index, k, order, out.ids.data() + rowAt[e], out.logprobs.data() + rowAt[e], out.next[e], out.chosen.data() + e);
  });
  return out.drawFailure.empty() ? failed : out.drawFailure;
}

/** A greedy step's result for JavaScript: the argmax ids, or with top-k asked {next, ids, logprobs, chosen}. */
Napi::Value greedyOutputsValue(Napi::Env env, const DecodeStep& step, const GreedyOutputs& out) {
  auto next = Napi::Int32Array::New(env, out.next.size());
  std::copy(out.next.begin(), out.next.end(), next.Data());
  if (step.topK.empty()) return next;
  auto ids = Napi::Int32Array::New(env, out.ids.size());
  std::copy(out.ids.begin(), out.ids.end(), ids.Data());
  auto logprobs = Napi::Float64Array::New(env, out.logprobs.size());
  std::copy(out.logprobs.begin(), out.logprobs.end(), logprobs.Data());
  auto chosen = Napi::Float64Array::New(env, out.chosen.size());
  std::copy(out.chosen.begin(), out.chosen.end(), chosen.Data());
  auto result = Napi::Object::New(env);
  result.Set("next", next);
  result.Set("ids", ids);
  result.Set("logprobs", logprobs);
  result.Set("chosen", chosen);
  return result;
}

/**
 * A step on a libuv worker thread, so that the event loop goes on reading requests and writing
 * streamed tokens while the graph computes (llama-server's HTTP threads do the same beside its
 * decode loop). The handle is marked busy until the promise settles: every other call on it is
 * refused meanwhile, since llama.cpp's context is not safe to use from two threads.
 */
class GreedyStepWorker : public Napi::AsyncWorker {
 public:
  GreedyStepWorker(Napi::Env env, Handle& handle, DecodeStep step)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), handle_(handle), step_(std::move(step)) {
    handle_.busy = true;
  }

  Napi::Promise Promise() const { return deferred_.Promise(); }

 protected:
  void Execute() override { failure_ = runGreedyStep(handle_, step_, outputs_); }

  void OnOK() override {
    handle_.busy = false;
    if (!failure_.empty()) {
      deferred_.Reject(Napi::Error::New(Env(), failure_).Value());
      return;
    }
    deferred_.Resolve(greedyOutputsValue(Env(), step_, outputs_));
  }

  void OnError(const Napi::Error& error) override {
    handle_.busy = false;
    deferred_.Reject(error.Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  Handle& handle_;
  const DecodeStep step_;
  GreedyOutputs outputs_;
  std::string failure_;
};

/**
 * A decode call's arguments (handle, sequences, counts, tokens, starts: Int32Array, maxPerDecode?) as
 * a DecodeStep: sequence i's next counts[i] tokens (a prompt's stretch to prefill, or the one token to
 * decode; `tokens` holds them back to back) at positions starts[i] onwards, at most maxPerDecode
 * (the batch size caps it) per llama_decode. Throws and returns false on a malformed call.
 */
bool readDecodeStep(const Napi::CallbackInfo& info, const char* usage, Handle*& handle, DecodeStep& step) {
  Napi::Env env = info.Env();
  handle = handleAt(info);
  if (handle == nullptr) return false;
  if (info.Length() < 5 || !info[1].IsTypedArray() || !info[2].IsTypedArray() || !info[3].IsTypedArray() || !info[4].IsTypedArray()) {
    Napi::TypeError::New(env, usage).ThrowAsJavaScriptException();
    return false;
  }
  const auto sequences = info[1].As<Napi::Int32Array>();
  const auto counts = info[2].As<Napi::Int32Array>();
  const auto tokens = info[3].As<Napi::Int32Array>();
  const auto starts = info[4].As<Napi::Int32Array>();
  const size_t entries = sequences.ElementLength();
  size_t total = 0;
  bool shaped = entries > 0 && counts.ElementLength() == entries && starts.ElementLength() == entries;
  for (size_t e = 0; shaped && e < entries; e++) {
    shaped = counts[e] > 0;
    total += shaped ? static_cast<size_t>(counts[e]) : 0;
  }
  if (!shaped || total != tokens.ElementLength()) {
    Napi::RangeError::New(env, std::string(usage) + ": every sequence needs at least one token, and tokens must hold exactly the counts").ThrowAsJavaScriptException();
    return false;
  }
  const int32_t batchSize = static_cast<int32_t>(symbols.nBatch(handle->ctx));
  if (!handle->hasBatch) {
    handle->batch = symbols.batchInit(batchSize, 0, 1);
    handle->hasBatch = true;
  }
  // A prefill chunk smaller than the batch: at most that many tokens per llama_decode.
  const int32_t asked = info.Length() > 5 && info[5].IsNumber() ? info[5].As<Napi::Number>().Int32Value() : batchSize;
  std::vector<int32_t> topK;
  std::vector<SamplingDraw> draws;
  if (info.Length() > 6 && info[6].IsTypedArray()) {
    const auto asks = info[6].As<Napi::Int32Array>();
    const int32_t vocab = symbols.vocabSize(symbols.modelVocab(symbols.getModel(handle->ctx)));
    bool valid = asks.ElementLength() == entries;
    bool drawing = false;
    for (size_t e = 0; valid && e < entries; e++) {
      valid = asks[e] >= kDrawHere && asks[e] <= vocab;
      drawing = drawing || asks[e] == kDrawHere;
    }
    if (!valid) {
      Napi::RangeError::New(env, std::string(usage) + ": topK needs one count per sequence, each from -2 (draw here) or -1 (keep the row) to the vocabulary size").ThrowAsJavaScriptException();
      return false;
    }
    topK.assign(asks.Data(), asks.Data() + entries);
    // Five numbers per sequence: temperature, top_k, top_p, min_p, uniform.
    const bool given = info.Length() > 7 && info[7].IsTypedArray() && info[7].As<Napi::TypedArray>().TypedArrayType() == napi_float64_array
        && info[7].As<Napi::Float64Array>().ElementLength() == entries * 5;
    if (drawing && !given) {
      Napi::RangeError::New(env, std::string(usage) + ": a topK of -2 (draw here) needs draws, a Float64Array of 5 numbers per sequence").ThrowAsJavaScriptException();
      return false;
    }
    if (given) {
      const auto numbers = info[7].As<Napi::Float64Array>();
      for (size_t e = 0; e < entries; e++) {
        const double* d = numbers.Data() + e * 5;
        draws.push_back({d[0], static_cast<int32_t>(d[1]), d[2], d[3], d[4]});
      }
    }
  }
  step = DecodeStep{
      {sequences.Data(), sequences.Data() + entries},
      {counts.Data(), counts.Data() + entries},
      {tokens.Data(), tokens.Data() + total},
      {starts.Data(), starts.Data() + entries},
      asked > 0 && asked < batchSize ? asked : batchSize,
      std::move(topK),
      std::move(draws),
  };
  return true;
}

/**
 * decodeGreedy(handle, sequences, counts, tokens, starts, maxPerDecode?, topK?) -> Int32Array: a step of
 * greedy requests as llama-server's loop runs it (readDecodeStep), only each sequence's last token
 * with an output, and that output's argmax. With topK (Int32Array, a count per sequence, 0 for
 * none, -1 to keep the output's logits row for stepRow): {next, ids, logprobs, chosen}, each asked sequence's top-k rows flat in sequence order and
 * its argmax's log-prob (NaN where none was asked), a log-softmax over the vocabulary as topKRow's. No sampler and no thread hop: it runs on the calling
 * thread, for steps too short to pay for a hop (decode tokens, short prompts).
 */
Napi::Value DecodeGreedy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Handle* handle = nullptr;
  DecodeStep step;
  if (!readDecodeStep(info, "decodeGreedy(handle, sequences, counts, tokens, starts)", handle, step)) return env.Undefined();
  GreedyOutputs outputs;
  const std::string failed = runGreedyStep(*handle, step, outputs);
  if (!failed.empty()) {
    Napi::Error::New(env, failed).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return greedyOutputsValue(env, step, outputs);
}

/**
 * decodeGreedyOffThread(...decodeGreedy's arguments) -> Promise<Int32Array>: the same step on a
 * libuv worker thread (GreedyStepWorker), for steps long enough that the event loop should go on
 * meanwhile (prompt stretches).
 */
Napi::Value DecodeGreedyOffThread(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Handle* handle = nullptr;
  DecodeStep step;
  if (!readDecodeStep(info, "decodeGreedyOffThread(handle, sequences, counts, tokens, starts)", handle, step)) return env.Undefined();
  auto* worker = new GreedyStepWorker(env, *handle, std::move(step));  // node-addon-api deletes it once settled
  const Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

/**
 * decodeVerify(handle, sequences, counts, tokens, starts: Int32Array) -> {argmax: Int32Array, trailNats: Float32Array}:
 * a speculative verification step — every token of every sequence gets an output (one per token,
 * flat, in `tokens`' order): its argmax, and by how many nats the log-prob of the next token of the
 * same sequence in `tokens` (the next draft) trails that argmax's (0 where the draft is the argmax;
 * NaN after a sequence's last token). Logit differences are log-prob differences: one softmax.
 */
Napi::Value DecodeVerify(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Handle* handle = nullptr;
  DecodeStep step;
  if (!readDecodeStep(info, "decodeVerify(handle, sequences, counts, tokens, starts)", handle, step)) return env.Undefined();
  const size_t total = step.tokens.size();
  auto argmax = Napi::Int32Array::New(env, total);
  auto trail = Napi::Float32Array::New(env, total);
  std::vector<bool> lastOfEntry(total, false);
  for (size_t e = 0, end = 0; e < step.sequences.size(); e++) lastOfEntry[(end += step.counts[e]) - 1] = true;
  const std::string failed = decodeInBatches(*handle, step, [](size_t, int32_t) { return true; }, [&](size_t, size_t flat, int32_t index) {
    argmax[flat] = argmaxRow(handle->ctx, index);
    if (argmax[flat] < 0) return false;
    const float* logits = symbols.getLogitsIth(handle->ctx, index);
    trail[flat] = lastOfEntry[flat] ? std::nanf("") : logits[argmax[flat]] - logits[step.tokens[flat + 1]];
    return true;
  });
  if (!failed.empty()) {
    Napi::Error::New(env, failed).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto out = Napi::Object::New(env);
  out.Set("argmax", argmax);
  out.Set("trailNats", trail);
  return out;
}

/**
 * teacherForcedTopK(handle, sequence, tokens: Int32Array, firstScored, k) -> {ids: Int32Array, logprobs: Float64Array, next: Float64Array}:
 * the tokens decoded into an empty sequence at positions 0 onwards (batch-size chunks), an output
 * only at positions firstScored and after, each reduced to its top-k here, on the calling thread.
 * Row r (position firstScored + r) is entries [r*k, (r+1)*k); next[r] is the log-prob of the token
 * that follows it in `tokens` (NaN for the last row), top-k or not: an echoed prompt's own log-probs. node-llama-cpp reduces nothing: it
 * hands JavaScript a Map of the whole vocabulary per position, which at a 152k vocabulary costs far
 * more than the forward pass. Like decodeGreedy, outside node-llama-cpp: the caller clears the sequence.
 */
Napi::Value TeacherForcedTopK(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Handle* handle = handleAt(info);
  if (handle == nullptr) return env.Undefined();
  if (info.Length() < 5 || !info[1].IsNumber() || !info[2].IsTypedArray() || !info[3].IsNumber() || !info[4].IsNumber()) {
    Napi::TypeError::New(env, "teacherForcedTopK(handle, sequence, tokens, firstScored, k)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const int32_t sequence = info[1].As<Napi::Number>().Int32Value();
  const auto tokens = info[2].As<Napi::Int32Array>();
  const int32_t count = static_cast<int32_t>(tokens.ElementLength());
  const int32_t firstScored = info[3].As<Napi::Number>().Int32Value();
  const int32_t vocab = symbols.vocabSize(symbols.modelVocab(symbols.getModel(handle->ctx)));
  const int32_t k = info[4].As<Napi::Number>().Int32Value();
  if (firstScored < 0 || firstScored >= count || k < 1 || k > vocab) {
    Napi::RangeError::New(env, "teacherForcedTopK: firstScored must index a token, and 1 <= k <= the vocabulary size").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const int32_t batchSize = static_cast<int32_t>(symbols.nBatch(handle->ctx));
  if (!handle->hasBatch) {
    handle->batch = symbols.batchInit(batchSize, 0, 1);
    handle->hasBatch = true;
  }
  const int32_t rows = count - firstScored;
  auto ids = Napi::Int32Array::New(env, static_cast<size_t>(rows) * k);
  auto logprobs = Napi::Float64Array::New(env, static_cast<size_t>(rows) * k);
  auto next = Napi::Float64Array::New(env, static_cast<size_t>(rows));
  std::vector<int32_t> order;
  const DecodeStep step{{sequence}, {count}, {tokens.Data(), tokens.Data() + count}, {0}, batchSize, {}};
  const std::string failed = decodeInBatches(*handle, step, [&](size_t, int32_t t) { return t >= firstScored; }, [&](size_t, size_t flat, int32_t index) {
    const size_t row = flat - static_cast<size_t>(firstScored);
    const int32_t following = flat + 1 < static_cast<size_t>(count) ? tokens.Data()[flat + 1] : -1;
    return topKRow(handle->ctx, index, k, order, ids.Data() + row * k, logprobs.Data() + row * k, following, next.Data() + row);
  });
  if (!failed.empty()) {
    Napi::Error::New(env, failed).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto out = Napi::Object::New(env);
  out.Set("ids", ids);
  out.Set("logprobs", logprobs);
  out.Set("next", next);
  return out;
}

/** clearSequence(handle, sequence): every cell and any recurrent state of one sequence. */
Napi::Value ClearSequence(const Napi::CallbackInfo& info) {
  Handle* handle = handleAt(info);
  if (handle != nullptr) symbols.memorySeqRm(symbols.memory(handle->ctx), info[1].As<Napi::Number>().Int32Value(), -1, -1);
  return info.Env().Undefined();
}

/** removeFrom(handle, sequence, position) -> bool: drops the sequence's cells at and after position; false where the memory cannot (recurrent state is not truncatable). */
Napi::Value RemoveFrom(const Napi::CallbackInfo& info) {
  Handle* handle = handleAt(info);
  if (handle == nullptr) return info.Env().Undefined();
  const bool removed = symbols.memorySeqRm(symbols.memory(handle->ctx), info[1].As<Napi::Number>().Int32Value(), info[2].As<Napi::Number>().Int32Value(), -1);
  return Napi::Boolean::New(info.Env(), removed);
}

/** firstPosition(handle, sequence) -> the smallest position still held (the sliding window's start on SWA models), -1 when empty. */
Napi::Value FirstPosition(const Napi::CallbackInfo& info) {
  Handle* handle = handleAt(info);
  if (handle == nullptr) return info.Env().Undefined();
  return Napi::Number::New(info.Env(), symbols.memorySeqPosMin(symbols.memory(handle->ctx), info[1].As<Napi::Number>().Int32Value()));
}

/** copySequence(handle, source, destination, p0, p1): destination also holds source's cells in [p0, p1). */
Napi::Value CopySequence(const Napi::CallbackInfo& info) {
  Handle* handle = handleAt(info);
  if (handle == nullptr) return info.Env().Undefined();
  symbols.memorySeqCp(symbols.memory(handle->ctx), info[1].As<Napi::Number>().Int32Value(), info[2].As<Napi::Number>().Int32Value(),
                      info[3].As<Napi::Number>().Int32Value(), info[4].As<Napi::Number>().Int32Value());
  return info.Env().Undefined();
}

/** memoryKind(handle) -> {recurrent, hybrid, slidingWindow}: what kind of state the model keeps. */
Napi::Value MemoryKind(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Handle* handle = handleAt(info);
  if (handle == nullptr) return env.Undefined();
  const llama_model* model = symbols.getModel(handle->ctx);
  auto out = Napi::Object::New(env);
  out.Set("recurrent", Napi::Boolean::New(env, symbols.modelIsRecurrent(model)));
  out.Set("hybrid", Napi::Boolean::New(env, symbols.modelIsHybrid(model)));
  out.Set("slidingWindow", Napi::Number::New(env, symbols.modelSwa(model)));
  return out;
}

/** A sequence's state as llama_state_seq_get_data_ext writes it under `flags`. */
Napi::Value SaveState(const Napi::CallbackInfo& info, llama_state_seq_flags flags) {
  Napi::Env env = info.Env();
  Handle* handle = handleAt(info);
  if (handle == nullptr) return env.Undefined();
  const int32_t sequence = info[1].As<Napi::Number>().Int32Value();
  const size_t size = symbols.stateSize(handle->ctx, sequence, flags);
  auto data = Napi::Uint8Array::New(env, size);
  const size_t written = symbols.stateGet(handle->ctx, data.Data(), size, sequence, flags);
  if (written != size) {
    Napi::Error::New(env, "llama_state_seq_get_data_ext wrote " + std::to_string(written) + " of " + std::to_string(size) + " bytes").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return data;
}

/** Puts a SaveState of the same flags back into a sequence; false where llama.cpp refused it. */
Napi::Value RestoreState(const Napi::CallbackInfo& info, llama_state_seq_flags flags, const char* usage) {
  Napi::Env env = info.Env();
  Handle* handle = handleAt(info);
  if (handle == nullptr) return env.Undefined();
  if (info.Length() < 3 || !info[2].IsTypedArray()) {
    Napi::TypeError::New(env, usage).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const auto data = info[2].As<Napi::Uint8Array>();
  const size_t read = symbols.stateSet(handle->ctx, data.Data(), data.ByteLength(), info[1].As<Napi::Number>().Int32Value(), flags);
  return Napi::Boolean::New(env, read == data.ByteLength());
}

/** saveCheckpoint(handle, sequence) -> Uint8Array: the part of the sequence's state that cannot be truncated (recurrent, sliding window). */
Napi::Value SaveCheckpoint(const Napi::CallbackInfo& info) {
  return SaveState(info, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
}

/** restoreCheckpoint(handle, sequence, data) -> bool: puts a saveCheckpoint's state back into a sequence. */
Napi::Value RestoreCheckpoint(const Napi::CallbackInfo& info) {
  return RestoreState(info, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY, "restoreCheckpoint(handle, sequence, data)");
}

/** saveSequence(handle, sequence) -> Uint8Array: everything the sequence holds (attention cells included), for a prompt cache in host memory. */
Napi::Value SaveSequence(const Napi::CallbackInfo& info) {
  return SaveState(info, 0);
}

/** restoreSequence(handle, sequence, data) -> bool: a saveSequence's state replaces what the sequence holds. */
Napi::Value RestoreSequence(const Napi::CallbackInfo& info) {
  return RestoreState(info, 0, "restoreSequence(handle, sequence, data)");
}

/**
 * tokenPieces(nativeModel, ids, special) -> {bytes, ends}: each id's piece as llama.cpp's
 * llama_token_to_piece gives it (no leading space stripped), the bytes back to back and ends[i]
 * where piece i ends. node-llama-cpp offers only llama_detokenize, which runs the vocabulary's
 * clean-up over the whole text (Llama 3's removes the space in " !==") and returns a JavaScript
 * string, so a piece that is part of a UTF-8 character comes back as U+FFFD; llama-server builds
 * its completions and /detokenize from these pieces. `nativeModel` is LlamaModel's `_model`.
 */
Napi::Value TokenPieces(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsObject() || !info[1].IsTypedArray() || !info[2].IsBoolean() ||
      info[1].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    Napi::TypeError::New(env, "tokenPieces(nativeModel, ids: Int32Array, special)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (!symbolsResolved(env)) return env.Undefined();
  void* wrapped = nullptr;
  if (napi_unwrap(env, info[0], &wrapped) != napi_ok || wrapped == nullptr) {
    Napi::Error::New(env, "the object is not a wrapped node-llama-cpp model").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto* addonModel = static_cast<AddonModel*>(wrapped);
  // The layout check: the model pointer must give back the vocabulary pointer stored beside it.
  if (!addonModel->modelLoaded || addonModel->disposed || addonModel->model == nullptr || addonModel->vocab == nullptr ||
      symbols.modelVocab(addonModel->model) != addonModel->vocab) {
    Napi::Error::New(env, "node-llama-cpp's model does not look as expected (loaded, its vocabulary); its layout may have changed").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const int32_t vocabSize = symbols.vocabSize(addonModel->vocab);
  const auto ids = info[1].As<Napi::Int32Array>();
  const bool special = info[2].As<Napi::Boolean>().Value();
  std::string bytes;
  auto ends = Napi::Int32Array::New(env, ids.ElementLength());
  char buffer[256];
  for (size_t i = 0; i < ids.ElementLength(); i++) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocabSize) {
      Napi::RangeError::New(env, "tokenPieces: id " + std::to_string(id) + " is outside the vocabulary").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    int32_t n = symbols.tokenToPiece(addonModel->vocab, id, buffer, sizeof(buffer), 0, special);
    if (n < 0) {
      std::string large(static_cast<size_t>(-n), '\0');
      n = symbols.tokenToPiece(addonModel->vocab, id, large.data(), -n, 0, special);
      bytes.append(large.data(), static_cast<size_t>(std::max(n, 0)));
    } else {
      bytes.append(buffer, static_cast<size_t>(n));
    }
    ends[i] = static_cast<int32_t>(bytes.size());
  }
  auto result = Napi::Object::New(env);
  result.Set("bytes", Napi::Buffer<char>::Copy(env, bytes.data(), bytes.size()));
  result.Set("ends", ends);
  return result;
}

/** close(handle): frees the pool. Only after the context was disposed: llama.cpp never detaches it. */
Napi::Value Close(const Napi::CallbackInfo& info) {
  Handle* handle = handleAt(info);
  if (handle == nullptr) return info.Env().Undefined();
  if (handle->pool != nullptr) symbols.poolFree(handle->pool);
  if (handle->hasBatch) symbols.batchFree(handle->batch);
  handles.erase(info[0].As<Napi::Number>().Uint32Value());
  return info.Env().Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("open", Napi::Function::New(env, Open));
  exports.Set("attachPool", Napi::Function::New(env, AttachPool));
  exports.Set("yieldCpu", Napi::Function::New(env, YieldCpu));
  exports.Set("settleOutputs", Napi::Function::New(env, SettleOutputs));
  exports.Set("greedyToken", Napi::Function::New(env, GreedyToken));
  exports.Set("logitsRow", Napi::Function::New(env, LogitsRow));
  exports.Set("stepRow", Napi::Function::New(env, StepRow));
  exports.Set("decodeGreedy", Napi::Function::New(env, DecodeGreedy));
  // decodeGreedy and decodeGreedyOffThread take topK: an older build would ignore it, so say so.
  exports.Set("greedyTopK", Napi::Boolean::New(env, true));
  // ...and a topK of -2 with draws (a sampled token drawn in the step): an older build refuses it.
  exports.Set("drawsInStep", Napi::Boolean::New(env, true));
  exports.Set("decodeGreedyOffThread", Napi::Function::New(env, DecodeGreedyOffThread));
  exports.Set("decodeVerify", Napi::Function::New(env, DecodeVerify));
  exports.Set("teacherForcedTopK", Napi::Function::New(env, TeacherForcedTopK));
  exports.Set("clearSequence", Napi::Function::New(env, ClearSequence));
  exports.Set("removeFrom", Napi::Function::New(env, RemoveFrom));
  exports.Set("firstPosition", Napi::Function::New(env, FirstPosition));
  exports.Set("copySequence", Napi::Function::New(env, CopySequence));
  exports.Set("memoryKind", Napi::Function::New(env, MemoryKind));
  exports.Set("saveCheckpoint", Napi::Function::New(env, SaveCheckpoint));
  exports.Set("restoreCheckpoint", Napi::Function::New(env, RestoreCheckpoint));
  exports.Set("saveSequence", Napi::Function::New(env, SaveSequence));
  exports.Set("restoreSequence", Napi::Function::New(env, RestoreSequence));
  exports.Set("tokenPieces", Napi::Function::New(env, TokenPieces));
  exports.Set("sampleRow", Napi::Function::New(env, SampleRow));
  exports.Set("close", Napi::Function::New(env, Close));
  return exports;
}

}  // namespace

NODE_API_MODULE(llama_context_access, Init)
