// Gives a node-llama-cpp context a persistent ggml thread pool, as llama-server gives each of its
// contexts (common/common.cpp, common_threadpools). node-llama-cpp 3.21.1 never attaches one, so
// ggml creates and joins n_threads - 1 threads for every graph it computes ("disposable" pool).
// Where an idle vCPU halts until woken (Firecracker/KVM guests such as our CI machines), the
// fresh thread waits milliseconds for its vCPU while the calling thread spins at the first
// barrier: 15-20 ms per token at 2 threads against 0.6 ms at 1 thread (README, Findings). A
// persistent pool's workers poll between graphs, so they are running when the next graph starts.
//
// The llama_context is private to node-llama-cpp's AddonContext; its class definition is read from
// the exact node-llama-cpp and llama.cpp sources installed (build-native.js extracts the headers),
// and every field used is checked against what the caller says the context was created with
// before the pointer is dereferenced.
#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <napi.h>

#include "AddonContext.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

namespace {

struct LlamaSymbols {
  decltype(&llama_attach_threadpool) attach = nullptr;
  decltype(&llama_n_ctx) nCtx = nullptr;
  decltype(&llama_n_seq_max) nSeqMax = nullptr;
  decltype(&llama_n_threads) nThreads = nullptr;
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
std::map<uint32_t, ggml_threadpool*> pools;
uint32_t nextPoolId = 1;

uint32_t expectUint(const Napi::Object& expected, const char* key) {
  return expected.Get(key).As<Napi::Number>().Uint32Value();
}

/**
 * attach(nativeContext, expected: {contextSize (per sequence), sequences, batchSize, threads}, poll) -> pool id.
 * `nativeContext` is LlamaContext's `_ctx` (node-llama-cpp's wrapped AddonContext).
 */
Napi::Value Attach(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsObject() || !info[1].IsObject() || !info[2].IsNumber()) {
    Napi::TypeError::New(env, "attach(nativeContext, expected, poll)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  static const std::string unresolved = resolve(symbols);
  if (!unresolved.empty()) {
    Napi::Error::New(env, unresolved).ThrowAsJavaScriptException();
    return env.Undefined();
  }
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
  if (!addonContext->contextLoaded || addonContext->disposed || addonContext->ctx == nullptr || params.n_ctx < contextSize * sequences || params.n_seq_max != sequences ||
      params.n_batch != batchSize || params.n_threads != threads || params.n_threads_batch != threads) {
    Napi::Error::New(env, "node-llama-cpp's context does not look as expected (loaded, sequences, batch size, threads); its layout may have changed")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  llama_context* ctx = addonContext->ctx;
  if (symbols.nCtx(ctx) != params.n_ctx || symbols.nSeqMax(ctx) != sequences || symbols.nThreads(ctx) != threads) {
    const std::string seen = "context size " + std::to_string(symbols.nCtx(ctx)) + ", sequences " + std::to_string(symbols.nSeqMax(ctx)) + ", threads " + std::to_string(symbols.nThreads(ctx));
    Napi::Error::New(env, "llama.cpp's context disagrees with node-llama-cpp's parameters: " + seen).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  ggml_threadpool_params poolParams = symbols.paramsDefault(threads);
  poolParams.poll = info[2].As<Napi::Number>().Uint32Value();
  ggml_threadpool* pool = symbols.poolNew(&poolParams);
  if (pool == nullptr) {
    Napi::Error::New(env, "ggml_threadpool_new failed").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  symbols.attach(ctx, pool, nullptr);
  const uint32_t id = nextPoolId++;
  pools[id] = pool;
  return Napi::Number::New(env, id);
}

/** release(id): frees a pool. Only after its context was disposed: llama.cpp never detaches it. */
Napi::Value Release(const Napi::CallbackInfo& info) {
  const auto found = pools.find(info[0].As<Napi::Number>().Uint32Value());
  if (found != pools.end()) {
    symbols.poolFree(found->second);
    pools.erase(found);
  }
  return info.Env().Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("attach", Napi::Function::New(env, Attach));
  exports.Set("release", Napi::Function::New(env, Release));
  return exports;
}

}  // namespace

NODE_API_MODULE(llama_threadpool, Init)
