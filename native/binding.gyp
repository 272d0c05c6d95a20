{
  "targets": [
    {
      "target_name": "plugin_host",
      "sources": ["addon/plugin_host.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "include"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS"],
      "cflags_cc": ["-std=c++17"],
      "libraries": ["-ldl"]
    },
    {
      "target_name": "bb_reference_plugin",
      "type": "shared_library",
      "sources": ["reference-plugin/plugin.c", "reference-plugin/tensors.c", "reference-plugin/attrs.c", "reference-plugin/blocks.c", "reference-plugin/quantized.c", "reference-plugin/matmul.c", "reference-plugin/gather.c", "reference-plugin/norms.c", "reference-plugin/activations.c", "reference-plugin/rope.c", "reference-plugin/attention.c", "reference-plugin/recurrent.c", "reference-plugin/moe.c"],
      "include_dirs": ["include"],
      "cflags": ["-std=c11", "-ffp-contract=off", "-fvisibility=hidden"],
      "libraries": ["-lm"]
    }
  ]
}
