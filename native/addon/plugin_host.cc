// The plugin host: loads a kernel plugin (native/include/bringup_bench_plugin.h, ABI v1 or v2) with
// dlopen and lets the host process call its ops on typed arrays. ABI v1's two kernels are served as
// the ops "dequantize" and "matvec", so the harness sees one generic surface. The host checks what
// the ABI lets it check before a plugin sees a pointer: the pair is registered, every dense tensor's
// buffer holds exactly its shape's bytes, and outputs are the caller's (sentinel-filled) buffers.
#include <dlfcn.h>
#include <napi.h>
#include <time.h>

#include <string>
#include <vector>

#include "bringup_bench_plugin.h"

namespace {

using InfoFn = const bb_plugin_info *(*)();
using LastErrorFn = const char *(*)();
using OpsFn = const bb_op_pair *(*)(size_t *);
using RunFn = int (*)(const char *, const char *, const bb_tensor *, size_t, bb_tensor *, size_t, const char *);
using TimeFn = int (*)(const char *, const char *, const bb_tensor *, size_t, bb_tensor *, size_t, const char *, uint32_t, uint32_t, double *);
using DequantizeFn = int (*)(uint32_t, const void *, size_t, float *);
using MatvecFn = int (*)(uint32_t, const void *, size_t, size_t, const float *, float *);

struct TypeLayout {
  uint32_t type;
  const char *name;
  int64_t block_values;
  int64_t block_bytes;
};

// ggml's block sizes (ggml-common.h) for the types the ABI names.
constexpr TypeLayout kLayouts[] = {
    {BB_TYPE_F32, "F32", 1, 4},       {BB_TYPE_F16, "F16", 1, 2},       {BB_TYPE_BF16, "BF16", 1, 2},
    {BB_TYPE_I32, "I32", 1, 4},       {BB_TYPE_Q8_0, "Q8_0", 32, 34},   {BB_TYPE_Q4_K, "Q4_K", 256, 144},
    {BB_TYPE_Q5_K, "Q5_K", 256, 176}, {BB_TYPE_Q6_K, "Q6_K", 256, 210},
};

// The types a v1 plugin's kernels take; v1 had no way to say which ones it supports.
constexpr uint32_t kV1Types[] = {BB_TYPE_F32, BB_TYPE_F16, BB_TYPE_Q8_0, BB_TYPE_Q4_K, BB_TYPE_Q5_K, BB_TYPE_Q6_K};

const TypeLayout *LayoutOf(uint32_t type) {
  for (const TypeLayout &layout : kLayouts) {
    if (layout.type == type) return &layout;
  }
  return nullptr;
}

const TypeLayout *LayoutNamed(const std::string &name) {
  for (const TypeLayout &layout : kLayouts) {
    if (name == layout.name) return &layout;
  }
  return nullptr;
}

int64_t NowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// The tensors of one call, with the names their descriptors point into.
struct Call {
  std::string op;
  std::string encoding;
  std::string attrs;
  std::vector<std::string> names;
  std::vector<bb_tensor> inputs;
  std::vector<bb_tensor> outputs;
};

class Plugin : public Napi::ObjectWrap<Plugin> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Plugin", {
      InstanceMethod("info", &Plugin::Info),
      InstanceMethod("run", &Plugin::Run),
      InstanceMethod("timeInPlugin", &Plugin::TimeInPlugin),
      InstanceMethod("prepare", &Plugin::PrepareCall),
      InstanceMethod("close", &Plugin::Close),
    });
  }

  explicit Plugin(const Napi::CallbackInfo &info) : Napi::ObjectWrap<Plugin>(info) {
    const std::string path = info[0].As<Napi::String>();
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    const std::string why = handle_ == nullptr ? std::string("cannot load the plugin: ") + dlerror() : Load();
    if (why.empty()) return;
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = nullptr;
    Napi::Error::New(info.Env(), why).ThrowAsJavaScriptException();
  }

  ~Plugin() override {
    if (handle_ != nullptr) dlclose(handle_);
  }

 private:
  template <typename Fn>
  Fn Symbol(const char *name) {
    return reinterpret_cast<Fn>(dlsym(handle_, name));
  }

  // Finds the entries of the plugin's ABI version; why it cannot be hosted, or "".
  std::string Load() {
    auto get_info = Symbol<InfoFn>("bb_plugin_info_get");
    if (get_info == nullptr) return "not a bringup-bench plugin: it exports no bb_plugin_info_get";
    info_ = get_info();
    if (info_ == nullptr) return "bb_plugin_info_get returned NULL";
    last_error_ = Symbol<LastErrorFn>("bb_last_error");
    if (info_->abi_version == 1) {
      dequantize_ = Symbol<DequantizeFn>("bb_dequantize");
      matvec_ = Symbol<MatvecFn>("bb_matvec");
      for (uint32_t type : kV1Types) {
        const std::string encoding = std::string(LayoutOf(type)->name) + ":F32";
        if (dequantize_ != nullptr) registered_.push_back({"dequantize", encoding});
        if (matvec_ != nullptr) registered_.push_back({"matvec", encoding});
      }
      return "";
    }
    if (info_->abi_version != 2) {
      return "the plugin was built for ABI version " + std::to_string(info_->abi_version) + "; this harness hosts versions 1 and 2 (rebuild it against native/include/bringup_bench_plugin.h)";
    }
    auto ops = Symbol<OpsFn>("bb_ops");
    run_ = Symbol<RunFn>("bb_op_run");
    time_ = Symbol<TimeFn>("bb_op_time");
    // Name only what is really missing: a plugin author fixes exactly those exports.
    std::string missing;
    for (const auto &[symbol, found] : {std::pair<const char *, bool>{"bb_ops", ops != nullptr}, {"bb_op_run", run_ != nullptr}, {"bb_last_error", last_error_ != nullptr}}) {
      if (!found) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
    }
    if (!missing.empty()) return "the plugin declares ABI version 2 but does not export " + missing + " (bb_ops, bb_op_run and bb_last_error are all required in v2)";
    size_t n_pairs = 0;
    const bb_op_pair *pairs = ops(&n_pairs);
    for (size_t i = 0; pairs != nullptr && i < n_pairs; i++) {
      if (pairs[i].op == nullptr || pairs[i].encoding == nullptr) return "bb_ops: pair " + std::to_string(i) + " has a null op or encoding";
      registered_.push_back({pairs[i].op, pairs[i].encoding});
    }
    return "";
  }

  Napi::Value Info(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (!Open(env)) return env.Undefined();
    Napi::Object out = Napi::Object::New(env);
    out.Set("abiVersion", info_->abi_version);
    out.Set("name", info_->name == nullptr ? "" : info_->name);
    out.Set("version", info_->version == nullptr ? "" : info_->version);
    out.Set("device", info_->device == nullptr ? "" : info_->device);
    out.Set("ownTimer", time_ != nullptr);
    Napi::Array ops = Napi::Array::New(env, registered_.size());
    for (size_t i = 0; i < registered_.size(); i++) {
      Napi::Object pair = Napi::Object::New(env);
      pair.Set("op", registered_[i].first);
      pair.Set("encoding", registered_[i].second);
      ops.Set(static_cast<uint32_t>(i), pair);
    }
    out.Set("ops", ops);
    return out;
  }

  // run(op, encoding, inputs: TensorArg[], outputs: TensorArg[], attrsJson): writes the outputs in place.
  Napi::Value Run(const Napi::CallbackInfo &info) {
    Call call;
    if (!Prepare(info, call)) return info.Env().Undefined();
    return RunCall(info.Env(), call);
  }

  // timeInPlugin(op, encoding, inputs, outputs, attrsJson, warmup, repetitions) -> Float64Array ns per call.
  Napi::Value TimeInPlugin(const Napi::CallbackInfo &info) {
    Call call;
    if (!Prepare(info, call)) return info.Env().Undefined();
    return TimeCall(info.Env(), call, info[5], info[6]);
  }

  // prepare(op, encoding, inputs, outputs, attrsJson) -> PreparedCall: the descriptors built once,
  // so a timing loop in JavaScript pays one argument-less N-API call per kernel call.
  Napi::Value PrepareCall(const Napi::CallbackInfo &info);

 public:
  Napi::Value RunCall(Napi::Env env, Call &call, uint32_t times = 1) {
    if (!Open(env)) return env.Undefined();
    for (uint32_t i = 0; i < times; i++) {
      const int status = Dispatch(call);
      if (status != 0) return Failed(env, call, status);
    }
    return env.Undefined();
  }

  // The plugin's bb_op_time when it has one, else this tight loop around the kernel (v1 kernels
  // too), so the harness can hold its own per-call median against C's.
  Napi::Value TimeCall(Napi::Env env, Call &call, Napi::Value warmup_arg, Napi::Value repetitions_arg) {
    if (!Open(env)) return env.Undefined();
    if (!warmup_arg.IsNumber() || !repetitions_arg.IsNumber() || repetitions_arg.As<Napi::Number>().Uint32Value() == 0) {
      Napi::RangeError::New(env, "timeInPlugin needs warmup ≥ 0 and repetitions ≥ 1").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    const uint32_t warmup = warmup_arg.As<Napi::Number>().Uint32Value();
    const uint32_t repetitions = repetitions_arg.As<Napi::Number>().Uint32Value();
    Napi::Float64Array ns = Napi::Float64Array::New(env, repetitions);
    if (time_ != nullptr) {
      if (const int status = time_(call.op.c_str(), call.encoding.c_str(), call.inputs.data(), call.inputs.size(), call.outputs.data(), call.outputs.size(), call.attrs.c_str(), warmup, repetitions, ns.Data()); status != 0) {
        return Failed(env, call, status);
      }
      return ns;
    }
    for (uint32_t r = 0; r < warmup; r++) {
      if (const int status = Dispatch(call); status != 0) return Failed(env, call, status);
    }
    for (uint32_t r = 0; r < repetitions; r++) {
      const int64_t start = NowNs();
      const int status = Dispatch(call);
      ns[r] = static_cast<double>(NowNs() - start);
      if (status != 0) return Failed(env, call, status);
    }
    return ns;
  }

 private:
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

  bool Registered(const std::string &op, const std::string &encoding) const {
    for (const auto &pair : registered_) {
      if (pair.first == op && pair.second == encoding) return true;
    }
    return false;
  }

  // Reads the call's arguments into descriptors; throws (and returns false) on anything malformed.
  bool Prepare(const Napi::CallbackInfo &info, Call &call) {
    Napi::Env env = info.Env();
    if (!Open(env)) return false;
    if (!info[0].IsString() || !info[1].IsString() || !info[2].IsArray() || !info[3].IsArray()) {
      Napi::TypeError::New(env, "expected (op: string, encoding: string, inputs: TensorArg[], outputs: TensorArg[], attrsJson: string)").ThrowAsJavaScriptException();
      return false;
    }
    call.op = info[0].As<Napi::String>();
    call.encoding = info[1].As<Napi::String>();
    call.attrs = info[4].IsString() ? info[4].As<Napi::String>().Utf8Value() : "{}";
    if (!Registered(call.op, call.encoding)) {
      Unsupported(env, "the plugin does not register (" + call.op + ", " + call.encoding + ")").ThrowAsJavaScriptException();
      return false;
    }
    Napi::Array inputs = info[2].As<Napi::Array>();
    Napi::Array outputs = info[3].As<Napi::Array>();
    call.names.reserve(inputs.Length() + outputs.Length());  // descriptors point into these strings
    for (uint32_t i = 0; i < inputs.Length(); i++) {
      if (!Describe(env, inputs.Get(i), call, call.inputs)) return false;
    }
    for (uint32_t i = 0; i < outputs.Length(); i++) {
      if (!Describe(env, outputs.Get(i), call, call.outputs)) return false;
    }
    return true;
  }

  // One { name, dtype, shape, data, strides? } into a descriptor. A dense tensor must hold exactly
  // its shape's bytes (whole blocks per row for block types); a strided one must reach no further
  // than its buffer.
  bool Describe(Napi::Env env, Napi::Value value, Call &call, std::vector<bb_tensor> &into) {
    if (!value.IsObject()) {
      Napi::TypeError::New(env, "a tensor argument must be an object { name, dtype, shape, data, strides? }").ThrowAsJavaScriptException();
      return false;
    }
    Napi::Object arg = value.As<Napi::Object>();
    call.names.push_back(arg.Get("name").ToString());
    const std::string &name = call.names.back();
    auto bad = [&](const std::string &why) {
      Napi::RangeError::New(env, "tensor " + name + ": " + why).ThrowAsJavaScriptException();
      return false;
    };
    bb_tensor t{};
    t.name = name.c_str();
    if (!arg.Get("dtype").IsNumber()) return bad("dtype must be a bb_type number");
    t.dtype = arg.Get("dtype").As<Napi::Number>().Uint32Value();
    const TypeLayout *layout = LayoutOf(t.dtype);
    if (layout == nullptr) return bad("dtype " + std::to_string(t.dtype) + " is not in the plugin ABI");
    if (!arg.Get("shape").IsArray()) return bad("shape must be an array");
    Napi::Array shape = arg.Get("shape").As<Napi::Array>();
    if (shape.Length() < 1 || shape.Length() > BB_MAX_DIMS) return bad("1 to " + std::to_string(BB_MAX_DIMS) + " dimensions");
    t.n_dims = shape.Length();
    for (uint32_t d = 0; d < t.n_dims; d++) {
      t.shape[d] = shape.Get(d).As<Napi::Number>().Int64Value();
      if (t.shape[d] < 0) return bad("negative dimension");
    }
    const int64_t inner = t.shape[t.n_dims - 1];
    if (inner % layout->block_values != 0) return bad(std::to_string(inner) + " values per row are not whole " + layout->name + " blocks of " + std::to_string(layout->block_values));
    if (!arg.Get("data").IsTypedArray()) return bad("data must be a typed array");
    Napi::TypedArray data = arg.Get("data").As<Napi::TypedArray>();
    t.data = static_cast<uint8_t *>(data.ArrayBuffer().Data()) + data.ByteOffset();
    t.n_bytes = data.ByteLength();
    // Dense strides, innermost first: packed blocks report 0 for the innermost dimension.
    int64_t dense[BB_MAX_DIMS];
    int64_t bytes = inner / layout->block_values * layout->block_bytes;
    dense[t.n_dims - 1] = layout->block_values == 1 ? layout->block_bytes : 0;
    for (int d = static_cast<int>(t.n_dims) - 2; d >= 0; d--) {
      dense[d] = bytes;
      bytes *= t.shape[d];
    }
    Napi::Value strides = arg.Get("strides");
    bool is_dense = true;
    if (strides.IsArray() && strides.As<Napi::Array>().Length() != t.n_dims) return bad("strides must have one entry per dimension");
    for (uint32_t d = 0; d < t.n_dims; d++) {
      t.strides[d] = strides.IsArray() ? strides.As<Napi::Array>().Get(d).As<Napi::Number>().Int64Value() : dense[d];
      if (t.strides[d] < 0) return bad("negative stride");
      is_dense = is_dense && t.strides[d] == dense[d];
    }
    if (is_dense && static_cast<int64_t>(t.n_bytes) != bytes) return bad(std::to_string(t.n_bytes) + " bytes; its shape of " + layout->name + " takes " + std::to_string(bytes));
    if (!is_dense && bytes > 0) {
      int64_t last = inner / layout->block_values * layout->block_bytes;  // the last row's bytes
      if (layout->block_values == 1) last = (inner - 1) * t.strides[t.n_dims - 1] + layout->block_bytes;
      for (uint32_t d = 0; d + 1 < t.n_dims; d++) last += (t.shape[d] - 1) * t.strides[d];
      if (layout->block_values != 1 && t.strides[t.n_dims - 1] != 0) return bad("the innermost stride of a block type is 0 (packed blocks)");
      if (last > static_cast<int64_t>(t.n_bytes)) return bad("its strides reach byte " + std::to_string(last) + " of a " + std::to_string(t.n_bytes) + "-byte buffer");
    }
    into.push_back(t);
    return true;
  }

  int Dispatch(Call &call) {
    if (run_ != nullptr) return run_(call.op.c_str(), call.encoding.c_str(), call.inputs.data(), call.inputs.size(), call.outputs.data(), call.outputs.size(), call.attrs.c_str());
    return DispatchV1(call);
  }

  // v1: "dequantize" takes [blocks] -> [y F32]; "matvec" takes [w, x F32] -> [y F32]. The shapes
  // were checked against the buffers in Describe; here they are checked against each other.
  int DispatchV1(Call &call) {
    const uint32_t type = LayoutNamed(call.encoding.substr(0, call.encoding.find(':')))->type;
    if (call.op == "dequantize") {
      if (call.inputs.size() != 1 || call.outputs.size() != 1) return V1Refusal("dequantize takes one input (blocks) and one output (y)");
      const bb_tensor &blocks = call.inputs[0];
      bb_tensor &y = call.outputs[0];
      const int64_t values = Elements(blocks);
      if (blocks.dtype != type || y.dtype != BB_TYPE_F32 || Elements(y) != values) return V1Refusal("dequantize: blocks must be of the encoding's type and y F32 with as many values");
      return dequantize_(type, blocks.data, static_cast<size_t>(values), static_cast<float *>(y.data));
    }
    if (call.inputs.size() != 2 || call.outputs.size() != 1) return V1Refusal("matvec takes two inputs (w, x) and one output (y)");
    const bb_tensor &w = call.inputs[0];
    const bb_tensor &x = call.inputs[1];
    bb_tensor &y = call.outputs[0];
    if (w.n_dims != 2 || w.dtype != type || x.dtype != BB_TYPE_F32 || y.dtype != BB_TYPE_F32 || Elements(x) != w.shape[1] || Elements(y) != w.shape[0]) {
      return V1Refusal("matvec: w [rows, cols] of the encoding's type, x F32 [cols], y F32 [rows]");
    }
    return matvec_(type, w.data, static_cast<size_t>(w.shape[0]), static_cast<size_t>(w.shape[1]), static_cast<const float *>(x.data), static_cast<float *>(y.data));
  }

  static int64_t Elements(const bb_tensor &t) {
    int64_t n = 1;
    for (uint32_t d = 0; d < t.n_dims; d++) n *= t.shape[d];
    return n;
  }

  int V1Refusal(const char *why) {
    host_error_ = why;
    return 1;
  }

  // BB_UNSUPPORTED_TYPE is v1's way of not registering a pair, and v2's way of refusing an attribute
  // or convention the plugin does not implement (docs/kernel-ops.md): the error says `unsupported`,
  // as the host's own refusal of an unregistered pair does, and the case is SKIPPED with the reason.
  Napi::Value Failed(Napi::Env env, const Call &call, int status) {
    std::string why = host_error_;
    host_error_.clear();
    if (why.empty() && last_error_ != nullptr && last_error_() != nullptr) why = last_error_();
    if (why.empty()) why = "no reason given (bb_last_error)";
    const std::string message = call.op + " (" + call.encoding + ") failed: " + why;
    (status == BB_UNSUPPORTED_TYPE ? Unsupported(env, message) : Napi::Error::New(env, message)).ThrowAsJavaScriptException();
    return env.Undefined();
  }

  static Napi::Error Unsupported(Napi::Env env, const std::string &message) {
    Napi::Error error = Napi::Error::New(env, message);
    error.Set("unsupported", Napi::Boolean::New(env, true));
    return error;
  }

  void *handle_ = nullptr;
  const bb_plugin_info *info_ = nullptr;
  LastErrorFn last_error_ = nullptr;
  RunFn run_ = nullptr;
  TimeFn time_ = nullptr;
  DequantizeFn dequantize_ = nullptr;
  MatvecFn matvec_ = nullptr;
  std::vector<std::pair<std::string, std::string>> registered_;
  // A v1 call the host refused itself (v1 plugins cannot describe their own shape errors).
  std::string host_error_;
};

// One call with its descriptors built: holds the plugin and the tensors' buffers alive.
class PreparedCall : public Napi::ObjectWrap<PreparedCall> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "PreparedCall", {
      InstanceMethod("run", &PreparedCall::Run),
      InstanceMethod("runBatch", &PreparedCall::RunBatch),
      InstanceMethod("timeInPlugin", &PreparedCall::TimeInPlugin),
    });
  }

  explicit PreparedCall(const Napi::CallbackInfo &info) : Napi::ObjectWrap<PreparedCall>(info) {}

  void Bind(Napi::Object plugin_object, Plugin *plugin, const Napi::CallbackInfo &args, Call &&call) {
    plugin_ = plugin;
    keep_.push_back(Napi::Persistent(plugin_object));
    for (uint32_t list = 2; list <= 3; list++) {
      Napi::Array tensors = args[list].As<Napi::Array>();
      for (uint32_t i = 0; i < tensors.Length(); i++) keep_.push_back(Napi::Persistent(tensors.Get(i).As<Napi::Object>().Get("data").As<Napi::Object>()));
    }
    call_ = std::move(call);
  }

 private:
  Napi::Value Run(const Napi::CallbackInfo &info) { return plugin_->RunCall(info.Env(), call_); }
  Napi::Value TimeInPlugin(const Napi::CallbackInfo &info) { return plugin_->TimeCall(info.Env(), call_, info[0], info[1]); }
  // runBatch(n): n calls back to back with no clock inside, for a caller that times the batch with
  // its own clock (one N-API transition per batch instead of per call).
  Napi::Value RunBatch(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (!info[0].IsNumber()) {
      Napi::TypeError::New(env, "runBatch(n: number)").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    return plugin_->RunCall(env, call_, info[0].As<Napi::Number>().Uint32Value());
  }

  Plugin *plugin_ = nullptr;
  std::vector<Napi::ObjectReference> keep_;
  Call call_;
};

Napi::Value Plugin::PrepareCall(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  Call call;
  if (!Prepare(info, call)) return env.Undefined();
  Napi::Object prepared = env.GetInstanceData<Napi::FunctionReference>()->New({});
  PreparedCall::Unwrap(prepared)->Bind(Value(), this, info, std::move(call));
  return prepared;
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("Plugin", Plugin::Define(env));
  env.SetInstanceData(new Napi::FunctionReference(Napi::Persistent(PreparedCall::Define(env))));
  exports.Set("abiVersion", Napi::Number::New(env, BB_PLUGIN_ABI_VERSION));
  return exports;
}

}  // namespace

NODE_API_MODULE(plugin_host, Init)
