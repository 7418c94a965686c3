#!/usr/bin/env bash
# Installs the Debian 12 packages aquifer needs to build, test and run its
# benchmarks. Idempotent and quick when everything is present: apt is only
# touched for what is missing.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ pkg-config
  # rebuilds of unchanged sources, across checkouts (CMakeLists.txt)
  ccache
  # benchmark scripts
  bc
  # libraries
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libturbojpeg0-dev libjpeg62-turbo-dev
  # PNG, GIF and BMP images found in JPEG datasets (converted by pack)
  libpng-dev libgif-dev libstb-dev libwebp-dev libtiff-dev
  # the monitor's Prometheus endpoint; the storage bench's io_uring queue
  libcpp-httplib-dev liburing-dev
  # promtool, which checks the nodes' and benches' /metrics against Prometheus' conventions
  prometheus
  # the Slurm recipe (examples/slurm) run by a real Slurm on this machine; systemd-analyze for the units
  slurm-wlm munge systemd
  # aquifer mount (FUSE low-level API) and fusermount3
  libfuse3-dev fuse3
  # the storage node's metadata and ETags; HTTP parsing (Boost.Beast); checksums (zlib)
  libsqlite3-dev libssl-dev libexpat1-dev libboost-dev zlib1g-dev
  # inline compression of blocks (a pool's compress= policy)
  liblz4-dev libzstd-dev
  # erasure coding (Reed-Solomon kernels)
  libisal-dev
  # real S3 clients that test the node, used unmodified
  python3-boto3 s3cmd awscli rclone s3fs fuse3
  # certificates with chosen dates (an expired one) for the TLS tests
  python3-cryptography
  # the cluster's membership and metadata store (tests start their own on 127.0.0.1)
  etcd-server
  # the lab (scripts/lab): hosts as network namespaces, links shaped with tc, partitions
  iproute2 nftables curl
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # fuzzing (clang's libFuzzer runtime)
  clang libclang-rt-14-dev
  # compatibility tests: independent Python implementations of the formats
  python3 python3-protobuf python3-crcmod python3-pil
  # the image-variant fixtures: libjpeg-turbo's own cjpeg/jpegtran/djpeg
  libjpeg-turbo-progs
  # WebDataset shards written by bsdtar (GNU tar is in the base system)
  libarchive-tools
  # the peer the pipeline is compared with: PyTorch's DataLoader + torchvision
  # (and h5py: an HDF5 writer that seeks back, written onto the mount)
  python3-numpy python3-torch python3-torchvision python3-h5py
  # the second peer (bench/compare_peers): OpenCV's decode and resize in the same DataLoader
  python3-opencv
  # the Python package (pybind11 extension for /usr/bin/python3) and its tests
  pybind11-dev python3-dev python3-pytest
  # the peer the storage bench is compared with; the browser that checks the HTML report,
  # and its DevTools client for the live dashboard's test
  fio chromium python3-websocket
  # formatting
  clang-format
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
