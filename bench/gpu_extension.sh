#!/bin/sh
# Builds aquifer's Python extension for a host whose Python is not Debian's
# (a GPU machine's PyTorch, say) from the libraries built here: the
# extension's own source is compiled there against that Python and its
# pybind11, and linked with aquifer's static libraries and the Debian
# shared libraries they need, carried beside them. Those the host lacks
# are put in PREBUILT/runtime (for LD_LIBRARY_PATH).
#
#   bench/gpu_extension.sh pack PREBUILT      (here: collect what travels)
#   bench/gpu_extension.sh build PREBUILT OUT (there: OUT/aquifer is the package)
set -eu
cmd=$1
pre=$2
case "$cmd" in
pack)
  build=${BUILD:-build}
  rm -rf "$pre" && mkdir -p "$pre/lib" "$pre/include" "$pre/so"
  for a in pipeline client dataset format image io s3 http ec common; do
    strip --strip-debug -o "$pre/lib/libaq_$a.a" "$build/libaq_$a.a"
  done
  cp -r /usr/include/fmt "$pre/include/"
  ext=$(ls "$build"/python/aquifer/_aquifer*.so)
  ldd "$ext" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
    libc.so* | libm.so* | libstdc++* | libgcc_s* | ld-linux*) ;;
    *) cp -L "$lib" "$pre/so/" ;;
    esac
  done
  du -sh "$pre"
  ;;
build)
  out=$3
  py=${PYTHON:-python3}
  inc=$($py -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  pyb=$($py -c "import pybind11; print(pybind11.get_include())")
  suffix=$($py -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
  rm -rf "$pre/runtime" && mkdir -p "$out/aquifer" "$pre/runtime"
  for f in "$pre"/so/*; do
    ldconfig -p | grep -q "^[[:space:]]*$(basename "$f") " || cp "$f" "$pre/runtime/"
  done
  echo "carried libraries used: $(ls "$pre/runtime" | tr '\n' ' ')"
  ${CXX:-c++} -O2 -fPIC -fvisibility=hidden -std=gnu++20 -shared -DAQ_VERSION=\"0.1.0\" -DFMT_SHARED \
    -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -Isrc -isystem "$pre/include" \
    -isystem "$inc" -isystem "$pyb" src/python/module.cc -o "$out/aquifer/_aquifer$suffix" \
    -Wl,--start-group "$pre"/lib/*.a -Wl,--end-group "$pre"/so/*
  cp python/aquifer/*.py "$out/aquifer/"
  ;;
*)
  echo "usage: $0 pack PREBUILT | build PREBUILT OUT" >&2
  exit 2
  ;;
esac
