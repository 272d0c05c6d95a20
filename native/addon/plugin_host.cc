// The plugin host: loads a kernel plugin (native/include/bringup_bench_plugin.h) with dlopen and
// lets the harness call its kernels on typed arrays. It checks only what the ABI lets it check
// (symbols, ABI version, output sizes); buffer sizes per tensor type are checked on the
// TypeScript side, which knows the block layouts.
#include <dlfcn.h>
#include <napi.h>

#include <string>

#include "bringup_bench_plugin.h"

namespace {

using InfoFn = const bb_plugin_info *(*)();
using DequantizeFn = int (*)(uint32_t, const void *, size_t, float *);
using MatvecFn = int (*)(uint32_t, const void *, size_t, size_t, const float *, float *);
using LastErrorFn = const char *(*)();

class Plugin : public Napi::ObjectWrap<Plugin> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Plugin", {
      InstanceMethod("info", &Plugin::Info),
      InstanceMethod("dequantize", &Plugin::Dequantize),
      InstanceMethod("matvec", &Plugin::Matvec),
      InstanceMethod("close", &Plugin::Close),
    });
  }

  explicit Plugin(const Napi::CallbackInfo &info) : Napi::ObjectWrap<Plugin>(info) {
    Napi::Env env = info.Env();
    const std::string path = info[0].As<Napi::String>();
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      Napi::Error::New(env, std::string("cannot load the plugin: ") + dlerror()).ThrowAsJavaScriptException();
      return;
    }
    auto get_info = reinterpret_cast<InfoFn>(dlsym(handle_, "bb_plugin_info_get"));
    if (get_info == nullptr) {
      Close(info);
      Napi::Error::New(env, "not a bringup-bench plugin: it exports no bb_plugin_info_get").ThrowAsJavaScriptException();
      return;
    }
    info_ = get_info();
    dequantize_ = reinterpret_cast<DequantizeFn>(dlsym(handle_, "bb_dequantize"));
    matvec_ = reinterpret_cast<MatvecFn>(dlsym(handle_, "bb_matvec"));
    last_error_ = reinterpret_cast<LastErrorFn>(dlsym(handle_, "bb_last_error"));
  }

  ~Plugin() override {
    if (handle_ != nullptr) dlclose(handle_);
  }

 private:
  Napi::Value Info(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (!Open(env)) return env.Undefined();
    Napi::Object out = Napi::Object::New(env);
    out.Set("abiVersion", info_->abi_version);
    out.Set("name", info_->name == nullptr ? "" : info_->name);
    out.Set("version", info_->version == nullptr ? "" : info_->version);
    out.Set("device", info_->device == nullptr ? "" : info_->device);
    Napi::Array kernels = Napi::Array::New(env);
    uint32_t n = 0;
    if (dequantize_ != nullptr) kernels.Set(n++, "dequantize");
    if (matvec_ != nullptr) kernels.Set(n++, "matvec");
    out.Set("kernels", kernels);
    return out;
  }

  // dequantize(type, blocks: Uint8Array, nValues) -> Float32Array
  Napi::Value Dequantize(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (!Ready(env, dequantize_, "bb_dequantize")) return env.Undefined();
    const uint32_t type = info[0].As<Napi::Number>().Uint32Value();
    Napi::Uint8Array blocks = info[1].As<Napi::Uint8Array>();
    const size_t n_values = info[2].As<Napi::Number>().Int64Value();
    Napi::Float32Array out = Napi::Float32Array::New(env, n_values);
    const int status = dequantize_(type, blocks.Data(), n_values, out.Data());
    if (status != 0) return Failed(env, "bb_dequantize", status);
    return out;
  }

  // matvec(type, weights: Uint8Array, rows, cols, x: Float32Array) -> Float32Array
  Napi::Value Matvec(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (!Ready(env, matvec_, "bb_matvec")) return env.Undefined();
    const uint32_t type = info[0].As<Napi::Number>().Uint32Value();
    Napi::Uint8Array weights = info[1].As<Napi::Uint8Array>();
    const size_t rows = info[2].As<Napi::Number>().Int64Value();
    const size_t cols = info[3].As<Napi::Number>().Int64Value();
    Napi::Float32Array x = info[4].As<Napi::Float32Array>();
    if (x.ElementLength() != cols) {
      Napi::RangeError::New(env, "x must hold cols values").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    Napi::Float32Array y = Napi::Float32Array::New(env, rows);
    const int status = matvec_(type, weights.Data(), rows, cols, x.Data(), y.Data());
    if (status != 0) return Failed(env, "bb_matvec", status);
    return y;
  }

  Napi::Value Close(const Napi::CallbackInfo &info) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = nullptr;
    info_ = nullptr;
    return info.Env().Undefined();
  }

  bool Open(Napi::Env env) {
    if (handle_ != nullptr) return true;
    Napi::Error::New(env, "the plugin is closed").ThrowAsJavaScriptException();
    return false;
  }

  // The plugin is open and exports the kernel about to be called.
  template <typename Fn>
  bool Ready(Napi::Env env, Fn fn, const char *symbol) {
    if (!Open(env)) return false;
    if (fn != nullptr) return true;
    Napi::Error::New(env, std::string("the plugin exports no ") + symbol).ThrowAsJavaScriptException();
    return false;
  }

  // The error carries `unsupportedType` when the plugin said it has no kernel for the type.
  Napi::Value Failed(Napi::Env env, const char *symbol, int status) {
    const char *why = last_error_ == nullptr ? nullptr : last_error_();
    Napi::Error error = Napi::Error::New(env, std::string(symbol) + " failed: " + (why == nullptr || *why == '\0' ? "no reason given (bb_last_error)" : why));
    error.Set("unsupportedType", Napi::Boolean::New(env, status == BB_UNSUPPORTED_TYPE));
    error.ThrowAsJavaScriptException();
    return env.Undefined();
  }

  void *handle_ = nullptr;
  const bb_plugin_info *info_ = nullptr;
  DequantizeFn dequantize_ = nullptr;
  MatvecFn matvec_ = nullptr;
  LastErrorFn last_error_ = nullptr;
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("Plugin", Plugin::Define(env));
  exports.Set("abiVersion", Napi::Number::New(env, BB_PLUGIN_ABI_VERSION));
  return exports;
}

}  // namespace

NODE_API_MODULE(plugin_host, Init)
