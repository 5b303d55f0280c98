{
  "targets": [{
    "target_name": "simba",
    "sources": ["src/simba_node.c"],
    "defines": ["NAPI_VERSION=8"],
    "include_dirs": ["<!(node -p \"process.env.SIMBA_INCLUDE_DIR || ''\")"],
    "cflags": ["-std=c99", "-fvisibility=hidden"],
    "libraries": ["<!@(node scripts/build.js --libs)"]
  }]
}
