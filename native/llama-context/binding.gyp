{
  "targets": [
    {
      "target_name": "llama_context_access",
      "sources": ["context_access.cc", "row_sampler.cc"],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "../../node_modules/node-llama-cpp/llama/addon",
        "llama-headers/include",
        "llama-headers/ggml/include"
      ],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS"],
      "cflags_cc": ["-std=c++17", "-ffp-contract=off", "-fno-trapping-math"],
      "libraries": ["-ldl"]
    }
  ]
}
